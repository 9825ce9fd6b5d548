// Stand-in for the product's own records of its business customers: a company whose employees
// sign in is an organization of the session service (docs/organizations.md), with the session
// rules the company asked for. The product creates the organization and sets its policy over
// the admin API when it onboards the company (`npm run demo` does it for Globex at start,
// dev/demo.ts); its sign-ins then name the organization, and the service applies the rules.

export interface Company {
  /** The organization's id: drawn when the company was onboarded, kept in the product's records. */
  id: string;
  name: string;
  /** Its policy, as `PUT /admin/organizations/{id}/policy` takes it. */
  policy: { ttlSeconds: number; maxLifetimeSeconds: number; idleTimeoutSeconds: number; maxPerUser: number };
}

export const GLOBEX: Company = {
  id: "org_demoGlobexDemoGlobex00",
  name: "Globex",
  policy: { ttlSeconds: 8 * 3600, maxLifetimeSeconds: 8 * 3600, idleTimeoutSeconds: 15 * 60, maxPerUser: 3 },
};

/** Who works at a customer: a real product asks its own user store. */
export const employers = new Map<string, Company>([["dana", GLOBEX]]);

/** The company an organization id names, as the session says it was signed in to. */
export const companyOf = (organization: string | null) =>
  [...employers.values()].find((company) => company.id === organization);

const inWords = (seconds: number) =>
  seconds % 3600 === 0 ? plural(seconds / 3600, "hour") : plural(Math.round(seconds / 60), "minute");
const plural = (count: number, unit: string) => `${count} ${unit}${count === 1 ? "" : "s"}`;

/** The company's rules in one line, as its employees' devices page states them. */
export function policyLine({ name, policy }: Company): string {
  const lifetime = `sessions end after ${inWords(policy.ttlSeconds)}, or ${inWords(policy.idleTimeoutSeconds)} idle`;
  return `${name} · ${lifetime} · at most ${policy.maxPerUser} devices`;
}
