const IPV4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;

/** The address as the edge wrote it, or null when it is not an IPv4/IPv6 literal. */
export function normalizeIp(value: string | null | undefined): string | null {
  if (!value || value.length > 45) return null;
  if (IPV4.test(value)) return value;
  if (!value.includes(":") || /[^0-9A-Fa-f:.]/.test(value)) return null;
  try {
    // The URL parser implements the full IPv6 grammar; it only validates here.
    new URL(`http://[${value}]/`);
    return value;
  } catch {
    return null;
  }
}
