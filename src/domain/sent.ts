/** A call's input as a caller sent it: any of its members, each of any value, until its rules have checked it. */
export type Sent<T> = { [K in keyof T]?: unknown };
