/**
 * Which OpenClaw the plugin runs in, and so which loopwatch behaviour profile its events ask for.
 *
 * loopwatch serves two behaviour profiles (CONTRACTS: an event's optional `profile` field):
 *   - "openclaw-2026.7": the configurable 2026.7 line (OpenClaw 2026.7.x);
 *   - "openclaw-2026.9.6": fixed thresholds, recovery then terminal blocks, warning notes
 *     (OpenClaw 2026.9.x and later: docs/runners/openclaw.md, "Which OpenClaw").
 *
 * The host's version is OpenClaw's plugin runtime `api.runtime.version` (`PluginRuntimeCore.version`
 * in OpenClaw's plugin SDK, e.g. "2026.9.6"). An unknown or unparsable version gives `null`: the
 * event carries no `profile` and loopwatch's configured default applies.
 */

export const PROFILE_2026_7 = "openclaw-2026.7";
export const PROFILE_2026_9 = "openclaw-2026.9.6";
export const PROFILES = new Set([PROFILE_2026_7, PROFILE_2026_9]);

/**
 * @param {unknown} version OpenClaw's version string ("2026.9.6", "2026.7.35", "2026.9.6-beta.1", ...)
 * @returns {string | null} the profile name, or null when the version says nothing we know
 */
export function profileForVersion(version) {
  if (typeof version !== "string") {
    return null;
  }
  const match = /^v?(\d{4})\.(\d{1,2})\.\d+/.exec(version.trim());
  if (!match) {
    return null;
  }
  const year = Number(match[1]);
  const month = Number(match[2]);
  if (year === 2026 && month === 7) {
    return PROFILE_2026_7;
  }
  if (year > 2026 || (year === 2026 && month >= 9)) {
    return PROFILE_2026_9;
  }
  return null; // 2026.8.x and older lines: loopwatch's configured default decides
}

/**
 * The host's version as the plugin API gives it.
 * @param {{runtime?: {version?: unknown}} | undefined} api
 * @returns {string | null}
 */
export function hostVersion(api) {
  const version = api?.runtime?.version;
  return typeof version === "string" && version.trim() !== "" ? version.trim() : null;
}
