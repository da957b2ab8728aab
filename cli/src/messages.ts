/** Every user-facing string of the CLI that is not a flag or command description, in one place. */
export const Messages = {
  keychainFallback: (file: string, reason: string) =>
    `Warning: no OS keychain reachable (${reason}); the secret is stored in ${file} (mode 0600)`,
  notLoggedIn: (profile: string) => `Not logged in (profile "${profile}"): run xfer auth login, or set XFER_API_KEY and XFER_URL`,
  noUrl: (profile: string) => `No server URL for profile "${profile}": pass --url or set XFER_URL`,
  loggedIn: (profile: string, url: string, location: string) => `Logged in to ${url} as profile "${profile}" (secret in the ${location})`,
  loggedOut: (profile: string) => `Logged out of profile "${profile}"`,
  notStored: (profile: string) => `Profile "${profile}" had no stored secret`,
  secretMissing: 'No API key given: pass --api-key, or pipe it on stdin',
  passwordMissing: 'No password given: pipe it with --password-stdin, or run in a terminal to be asked',
  credentialsInputMissing: 'Credentials are read from --credentials-file or --credentials-stdin',
  credentialsNotJson: (source: string, reason: string) => `Credentials from ${source} are not a JSON object: ${reason}`,
  optionsNotJson: (reason: string) => `--options is not a JSON object: ${reason}`,
  nothingToUpdate: 'Nothing to update: give at least one flag',
  deleted: (what: string, id: string) => `Deleted ${what} ${id}`,
  empty: 'No results',
} as const;
