const IPV4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;

/** The address as the edge wrote it, or null when it is not an IPv4/IPv6 literal. */
export function normalizeIp(value: unknown): string | null {
  if (typeof value !== "string" || value === "" || value.length > 45) return null;
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

/** A loopback host, as a URL's hostname gives it: localhost and its subdomains (RFC 6761), 127.0.0.0/8, [::1]. */
export function isLoopback(host: string): boolean {
  return /(^|\.)localhost$/i.test(host) || /^127\.\d+\.\d+\.\d+$/.test(host) || host === "[::1]";
}

/** https, or http on a loopback host (development only): what a URL the service is configured with may be. */
export function isHttpsOrLoopback(url: URL): boolean {
  return url.protocol === "https:" || (url.protocol === "http:" && isLoopback(url.hostname));
}

/** Whether an IPv4 or IPv6 literal is off the public internet (private, loopback, link-local, metadata…). */
function isPrivateAddress(host: string): boolean {
  const v4 = /^(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(host);
  if (v4) {
    const [a, b] = [Number(v4[1]), Number(v4[2])];
    return (
      a === 0 ||
      a === 10 ||
      a === 127 ||
      (a === 100 && b >= 64 && b <= 127) ||
      (a === 169 && b === 254) ||
      (a === 172 && b >= 16 && b <= 31) ||
      (a === 192 && b === 168) ||
      (a === 198 && (b === 18 || b === 19)) ||
      a >= 224
    );
  }
  if (!host.startsWith("[")) return false;
  const v6 = host.slice(1, -1).toLowerCase();
  // ::ffff:a.b.c.d arrives from the URL parser as ::ffff:xxxx:xxxx.
  const mapped = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(v6);
  if (mapped) {
    const [high, low] = [Number.parseInt(mapped[1] as string, 16), Number.parseInt(mapped[2] as string, 16)];
    return isPrivateAddress(`${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`);
  }
  return v6 === "::" || v6 === "::1" || /^f[cd]/.test(v6) || /^fe[89ab]/.test(v6) || v6.startsWith("::ffff:");
}

// Names only a local network resolves: mDNS (.local), RFC 8375 (home.arpa), cloud metadata (.internal).
const LOCAL_NAMES = /(^|\.)(local|internal|home\.arpa)$/i;

/** Whether a URL's hostname may be on the public internet: a dotted name, not loopback or local, not private. */
export function isPublicHost(host: string): boolean {
  return host.includes(".") && !isLoopback(host) && !LOCAL_NAMES.test(host) && !isPrivateAddress(host);
}
