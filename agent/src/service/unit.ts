/**
 * The agent's systemd unit, as text. One source for both copies: `xfer-agent install-service`
 * renders it with the running binary's path, and `agent/systemd/xfer-agent.service` (the copy in
 * the package) is this rendering with the defaults and `/usr/local/bin/xfer-agent` (a test keeps
 * the two equal). docs/operations.md "Running the agent as a service" explains the choices.
 */

/** What varies between installed agents. */
export interface AgentUnitOptions {
  /** Unit name without `.service`; also the state directory's name under /var/lib. */
  name: string;
  /** ExecStart's program and arguments before `start`: the binary, or node and the script. */
  command: string[];
  /** Absolute path of the environment file with the URL and the token. */
  envFile: string;
  /** A dedicated user the agent runs as; null: a dynamic user made up by systemd. */
  user: string | null;
  /** Local directories the agent may read and write (allow_roots); needs `user`. */
  allowRoots: string[];
}

/** The unit's name when install-service is given no --name. */
export const DEFAULT_NAME = 'xfer-agent';

/** Top-level directories ProtectHome= hides (yes) or makes read-only (read-only). */
export const HOME_DIRS = ['/home', '/root', '/run/user'];

export function isUnder(path: string, dir: string): boolean {
  return path === dir || path.startsWith(`${dir}/`);
}

/** The unit file text for these options. */
export function renderAgentUnit(o: AgentUnitOptions): string {
  const envDir = o.envFile.slice(0, o.envFile.lastIndexOf('/'));
  // ConfigurationDirectory= names a directory under /etc; an env file elsewhere has none.
  const configDir = envDir.startsWith('/etc/') ? envDir.slice('/etc/'.length) : null;
  // ProtectHome=yes hides /home even from ReadWritePaths= under it: a root there needs read-only.
  const homeRoot = o.allowRoots.some((root) => HOME_DIRS.some((dir) => isUnder(root, dir)));
  const lines = [
    `# xfer-agent as a systemd service (docs/operations.md "Running the agent as a service"), as`,
    `# \`xfer-agent install-service\` writes it: ExecStart is the binary it ran from (in the copy`,
    `# shipped in the package, /usr/local/bin/xfer-agent). Re-run it with --force to change this`,
    `# file, or override settings with \`systemctl edit ${o.name}\`.`,
    `#`,
    `# Settings come from the environment file (docs/agent.md "Running it": XFER_AGENT_URL,`,
    `# XFER_AGENT_TOKEN, XFER_AGENT_MAX_JOBS, …). systemd reads it as root before starting the agent,`,
    `# so it stays root-only (0600) and the agent never reads it itself.`,
    ``,
    `[Unit]`,
    `Description=xfer agent${o.name === DEFAULT_NAME ? '' : ` ${o.name}`} (runs transfer jobs near the data)`,
    `Wants=network-online.target`,
    `After=network-online.target remote-fs.target`,
    ...(o.allowRoots.length > 0 ? [`# The allowed roots' file systems (an NFS mount) are mounted first.`, `RequiresMountsFor=${o.allowRoots.join(' ')}`] : []),
    ``,
    `[Service]`,
    `Type=exec`,
    `ExecStart=${[...o.command, 'start'].join(' ')}`,
    `EnvironmentFile=${o.envFile}`,
    `# Job reports waiting for the control plane past the memory bound spill here (outbox/).`,
    `Environment=XFER_AGENT_STATE_DIR=%S/${o.name}`,
    `StateDirectory=${o.name}`,
    `StateDirectoryMode=0700`,
    ...(configDir ? [`ConfigurationDirectory=${configDir}`, `ConfigurationDirectoryMode=0700`] : []),
    ``,
    ...(o.user === null
      ? [
        `# A user made up by systemd at start: nothing on the host belongs to it, so the agent can touch`,
        `# only its state directory. Right for agents whose connections are all remote (SFTP, S3, …). An`,
        `# agent that reads or writes local or NFS-mounted directories (allow_roots) needs a real user the`,
        `# files belong to, and those directories opened up: install-service --user NAME --allow-roots DIRS`,
        `# writes \`User=NAME\` and \`ReadWritePaths=DIRS\` instead (a dynamic user's files outside its own`,
        `# directories would be owned by a UID systemd may hand to another service later).`,
        `DynamicUser=yes`,
      ]
      : [
        `# A dedicated user: files the agent writes under its allowed roots belong to it, and it reads`,
        `# what that user (or its groups) may read. Everything else stays read-only (ProtectSystem=strict).`,
        `User=${o.user}`,
        ...(o.allowRoots.length > 0 ? [`ReadWritePaths=${o.allowRoots.join(' ')}`] : []),
      ]),
    ``,
    `# SIGTERM: the agent takes no new jobs, lets running ones finish for XFER_AGENT_DRAIN_TIMEOUT_MS`,
    `# (30 s by default), sends its last reports (up to 5 s more), then exits 0. TimeoutStopSec covers`,
    `# that with room to spare; raise it with the drain timeout. Only the agent gets the SIGTERM.`,
    `KillSignal=SIGTERM`,
    `KillMode=mixed`,
    `TimeoutStopSec=60`,
    `Restart=on-failure`,
    `RestartSec=5`,
    `# 2: a usage error (bad flag, variable or file); 3: the control plane refused the token for good`,
    `# (revoked, unknown). Restarting repeats the same refusal: stay stopped, the log says why.`,
    `RestartPreventExitStatus=2 3`,
    ``,
    `# Sandbox. Node needs none of what is taken away here.`,
    `NoNewPrivileges=yes`,
    `CapabilityBoundingSet=`,
    `AmbientCapabilities=`,
    `ProtectSystem=strict`,
    `ProtectHome=${homeRoot ? 'read-only' : 'yes'}`,
    `PrivateTmp=yes`,
    `PrivateDevices=yes`,
    `ProtectClock=yes`,
    `ProtectHostname=yes`,
    `ProtectKernelTunables=yes`,
    `ProtectKernelModules=yes`,
    `ProtectKernelLogs=yes`,
    `ProtectControlGroups=yes`,
    `ProtectProc=invisible`,
    `# AF_NETLINK: Node's connect asks getaddrinfo for AI_ADDRCONFIG, which reads the host's addresses`,
    `# over a netlink socket to know whether IPv6 answers are any use (read-only without capabilities).`,
    `RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX AF_NETLINK`,
    `RestrictNamespaces=yes`,
    `RestrictRealtime=yes`,
    `RestrictSUIDSGID=yes`,
    `LockPersonality=yes`,
    `SystemCallArchitectures=native`,
    `# Every system call Node 24 made running the agent's tests under strace (87 distinct ones, the`,
    `# binary included) is in @system-service; anything else fails with EPERM rather than killing it.`,
    `SystemCallFilter=@system-service`,
    `SystemCallErrorNumber=EPERM`,
    `# Not set: MemoryDenyWriteExecute=yes. V8's JIT writes machine code into pages it then makes`,
    `# executable, which that setting forbids: under the kernel's same rule (PR_SET_MDWE) Node 24 aborts`,
    `# in V8's SetPermissions before running a line (node --jitless would run, far slower).`,
    `# Not set: ProcSubset=pid. Node reads /proc/meminfo (its heap limit) and V8 /proc/sys/vm/, which`,
    `# that setting hides (strace of the tests).`,
    `# Not set: PrivateUsers=yes. It would map the owners of files under allow_roots to "nobody", so`,
    `# group permissions on shared directories would stop working.`,
    ``,
    `[Install]`,
    `WantedBy=multi-user.target`,
  ];
  return lines.join('\n') + '\n';
}
