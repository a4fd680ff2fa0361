//! The kernel's confinement of a stdio server process (a binding's `sandbox`): built in brain
//! before the fork — the Landlock ruleset (files, TCP ports, signal and abstract-socket scopes),
//! the seccomp filters, the rlimits, the private temporary directory — and applied in the child
//! between `fork` and `exec` by [`Confinement::apply`], which allocates nothing.
//!
//! What the default allows: reading the system's directories, the command's own installation
//! (the prefix of the program as named and of the file it resolves to) and the script files
//! its arguments name; reading and writing a private temporary directory (`TMPDIR`); no network
//! (a user and network namespace of its own, and Landlock denying every TCP connect and bind).
//! A sandbox brain cannot apply in full is an error: the process is never started unconfined.

use std::path::{Path, PathBuf};

use brain_config::SandboxRules;
use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, Scope,
};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};

/// The Landlock ABI the sandbox requires: files, TCP ports (4), signal scoping (6).
const LANDLOCK_ABI: ABI = ABI::V6;
/// The system's directories every process may read (those that exist).
const SYSTEM_READ: &[&str] = &[
    "/usr",
    "/lib",
    "/lib64",
    "/lib32",
    "/bin",
    "/sbin",
    "/etc",
    "/opt",
    "/dev/urandom",
    "/dev/random",
    "/sys/devices/system/cpu",
    "/sys/fs/cgroup",
];
/// The devices every process may read and write.
const SYSTEM_WRITE: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/tty"];
/// The open-file limit of a sandboxed process.
const OPEN_FILES: u64 = 4096;

/// A process's confinement, ready to apply in the child.
pub(crate) struct Confinement {
    /// Taken by [`Confinement::apply`] (the child applies it once).
    ruleset: Option<RulesetCreated>,
    /// The filters answering `EPERM` and (for `clone3`) `ENOSYS`.
    filters: [BpfProgram; 2],
    /// A user and network namespace of its own (`"network": "none"`).
    no_network: bool,
    /// `/proc/self/uid_map` and `gid_map` for the namespace: the process keeps its ids.
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
    /// `RLIMIT_DATA`, in bytes.
    data: Option<u64>,
    /// The private temporary directory (removed with the confinement).
    pub(crate) scratch: Scratch,
}

/// A private temporary directory, removed when dropped.
pub(crate) struct Scratch(pub(crate) PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Confinement {
    /// The confinement of `command` (program, then arguments; run in `cwd`) under `rules`.
    /// `Err` says what brain cannot apply (a path that does not exist, a kernel without the
    /// Landlock ABI it needs): the process must not start.
    pub(crate) fn prepare(
        command: &[String],
        cwd: Option<&str>,
        path_var: Option<&str>,
        rules: &SandboxRules,
    ) -> Result<Confinement, String> {
        let scratch = scratch()?;
        let mut read: Vec<PathBuf> = Vec::new();
        for path in SYSTEM_READ {
            if Path::new(path).exists() {
                read.push(PathBuf::from(path));
            }
        }
        if let Some(program) = command.first() {
            read.extend(installation(program, cwd, path_var));
        }
        for argument in command.iter().skip(1) {
            let path = within(cwd, argument);
            if path.is_file() {
                read.push(path);
            }
        }
        for path in &rules.read {
            read.push(existing("read", path)?);
        }
        let mut write: Vec<PathBuf> = SYSTEM_WRITE
            .iter()
            .map(PathBuf::from)
            .filter(|path| path.exists())
            .collect();
        write.push(scratch.0.clone());
        for path in &rules.write {
            write.push(existing("write", path)?);
        }
        let ruleset = ruleset(&read, &write, rules.connect().unwrap_or(&[]))?;
        let uid = rustix::process::getuid().as_raw();
        let gid = rustix::process::getgid().as_raw();
        Ok(Confinement {
            ruleset: Some(ruleset),
            filters: filters()?,
            no_network: rules.connect().is_none(),
            uid_map: format!("{uid} {uid} 1").into_bytes(),
            gid_map: format!("{gid} {gid} 1").into_bytes(),
            data: rules.memory_mb.map(|mb| mb.saturating_mul(1024 * 1024)),
            scratch,
        })
    }

    /// Applies the confinement to this process (the child, before `exec`): the rlimits, the
    /// namespaces, Landlock (with `no_new_privs`), then seccomp. Allocates nothing.
    pub(crate) fn apply(&mut self) -> std::io::Result<()> {
        use rustix::process::{Resource, Rlimit, setrlimit};
        let limit = |value: u64| Rlimit {
            current: Some(value),
            maximum: Some(value),
        };
        setrlimit(Resource::Core, limit(0))?;
        setrlimit(Resource::Nofile, limit(OPEN_FILES))?;
        if let Some(bytes) = self.data {
            setrlimit(Resource::Data, limit(bytes))?;
        }
        if self.no_network {
            self.own_network();
        }
        let ruleset = self
            .ruleset
            .take()
            .ok_or_else(|| std::io::Error::other("the sandbox's ruleset was applied already"))?;
        ruleset.restrict_self().map_err(|_| {
            std::io::Error::from_raw_os_error(rustix::io::Errno::PERM.raw_os_error())
        })?;
        for filter in &self.filters {
            seccompiler::apply_filter(filter).map_err(|_| {
                std::io::Error::from_raw_os_error(rustix::io::Errno::PERM.raw_os_error())
            })?;
        }
        Ok(())
    }

    /// A user and network namespace of the process's own, its ids mapped to themselves. Where
    /// the kernel refuses unprivileged user namespaces, Landlock's TCP rules still deny every
    /// connect and bind (UDP is then open), and stderr says so.
    fn own_network(&self) {
        use rustix::fs::{Mode, OFlags, open};
        use rustix::thread::{UnshareFlags, unshare_unsafe};
        // SAFETY: the child is single-threaded between fork and exec; no file-descriptor table
        // or memory is shared with another thread.
        #[allow(unsafe_code)]
        let unshared =
            unsafe { unshare_unsafe(UnshareFlags::NEWUSER | UnshareFlags::NEWNET) }.is_ok();
        if !unshared {
            let _ = rustix::io::write(
                rustix::stdio::stderr(),
                b"brain sandbox: no network namespace (user namespaces are blocked here): TCP \
                  connects and binds are denied by Landlock, UDP is open\n",
            );
            return;
        }
        let write = |path: &str, bytes: &[u8]| {
            if let Ok(fd) = open(path, OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty()) {
                let _ = rustix::io::write(&fd, bytes);
            }
        };
        write("/proc/self/setgroups", b"deny");
        write("/proc/self/uid_map", &self.uid_map);
        write("/proc/self/gid_map", &self.gid_map);
    }
}

/// Has `command`'s child apply `confinement` between `fork` and `exec`; the confinement's
/// private directory is returned, to be removed once the process has ended.
pub(crate) fn confine(
    command: &mut tokio::process::Command,
    mut confinement: Confinement,
) -> Scratch {
    let scratch = std::mem::replace(&mut confinement.scratch, Scratch(PathBuf::new()));
    command.env("TMPDIR", &scratch.0);
    #[allow(unsafe_code)]
    // SAFETY: the closure runs in the forked child before `exec`: it only makes system calls
    // (setrlimit, unshare, open/write on /proc/self, prctl, landlock, seccomp) on values built
    // before the fork, and allocates nothing.
    unsafe {
        command.pre_exec(move || confinement.apply());
    }
    scratch
}

/// A new private directory under the system's temporary directory (mode 0700), its name
/// random, so that another user of the machine cannot create it first (the creation would fail,
/// never follow what they made).
fn scratch() -> Result<Scratch, String> {
    use ring::rand::SecureRandom;
    use std::os::unix::fs::DirBuilderExt;
    let mut random = [0u8; 12];
    ring::rand::SystemRandom::new()
        .fill(&mut random)
        .map_err(|_| "no randomness for the sandbox's private directory".to_owned())?;
    let base = std::env::temp_dir();
    let name = format!("brain-sandbox-{}", crate::state::hex(&random));
    let path = base.join(name);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&path)
        .map_err(|error| format!("cannot create {}: {error}", path.display()))?;
    Ok(Scratch(path))
}

/// `path` as written in `sandbox.{list}`, which must exist.
fn existing(list: &str, path: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(path);
    if path.exists() {
        Ok(path)
    } else {
        Err(format!(
            "`sandbox.{list}` names {}, which does not exist (or brain cannot see it)",
            path.display()
        ))
    }
}

/// `argument` as a path, relative to `cwd` when it is relative.
fn within(cwd: Option<&str>, argument: &str) -> PathBuf {
    let path = Path::new(argument);
    match cwd {
        Some(cwd) if path.is_relative() => Path::new(cwd).join(path),
        _ => path.to_owned(),
    }
}

/// The installation of `program`: the prefix of the program as named (found on `path_var`
/// when it has no `/`) and of the file it resolves to — a `bin/` directory's parent, else the
/// file's own directory — and, for a script (`#!`), its interpreter's installation too (through
/// `/usr/bin/env NAME` as well).
fn installation(program: &str, cwd: Option<&str>, path_var: Option<&str>) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut next = Some(program.to_owned());
    // The program, then its interpreter, then the interpreter's (`env`'s) program.
    for _ in 0..3 {
        let Some(program) = next.take() else { break };
        let Some(named) = located(&program, cwd, path_var) else {
            break;
        };
        let resolved = std::fs::canonicalize(&named).ok();
        next = resolved.as_deref().and_then(interpreter);
        let prefixes = [Some(named), resolved].into_iter().flatten();
        // A program that is not there is reported as such when it is started.
        found.extend(prefixes.filter_map(|f| prefix(&f)).filter(|p| p.exists()));
    }
    found
}

/// `program` as a file: the path as written (relative to `cwd`), or found on `path_var`.
fn located(program: &str, cwd: Option<&str>, path_var: Option<&str>) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(within(cwd, program));
    }
    (path_var.unwrap_or_default().split(':'))
        .map(|dir| Path::new(dir).join(program))
        .find(|candidate| candidate.is_file())
}

/// The interpreter a script's `#!` line names (for `/usr/bin/env NAME`, NAME).
fn interpreter(script: &Path) -> Option<String> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let read = std::fs::File::open(script).ok()?.read(&mut head).ok()?;
    let line = head[..read].strip_prefix(b"#!")?;
    let line = &line[..line.iter().position(|b| *b == b'\n')?];
    let mut words = std::str::from_utf8(line).ok()?.split_whitespace();
    let first = words.next()?;
    match first.rsplit('/').next() {
        Some("env") => words.find(|word| !word.starts_with('-')).map(str::to_owned),
        _ => Some(first.to_owned()),
    }
}

/// The prefix of an installed file: `…/venv` for `…/venv/bin/python`, else its directory.
fn prefix(file: &Path) -> Option<PathBuf> {
    let dir = file.parent()?;
    match dir.file_name() {
        Some(name) if name == "bin" => dir.parent().map(Path::to_owned),
        _ => Some(dir.to_owned()),
    }
}

/// The Landlock ruleset: every file access handled, `read` readable, `write` writable too, TCP
/// connects only to `connect`'s ports and no binds, no signals or abstract sockets outside.
/// Every right must be enforced in full.
fn ruleset(read: &[PathBuf], write: &[PathBuf], connect: &[u16]) -> Result<RulesetCreated, String> {
    let failed = |error: landlock::RulesetError| {
        format!("the kernel cannot apply the sandbox (Landlock ABI 6 or newer is needed): {error}")
    };
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(LANDLOCK_ABI))
        .and_then(|r| r.handle_access(AccessNet::from_all(LANDLOCK_ABI)))
        .and_then(|r| r.scope(Scope::from_all(LANDLOCK_ABI)))
        .and_then(|r| r.create())
        .map_err(failed)?;
    let rules = (read.iter().map(|p| (p, AccessFs::from_read(LANDLOCK_ABI))))
        .chain(write.iter().map(|p| (p, AccessFs::from_all(LANDLOCK_ABI))));
    for (path, access) in rules {
        let fd = PathFd::new(path).map_err(|error| format!("{}: {error}", path.display()))?;
        // A file takes only the rights a file can have.
        let access = if path.is_dir() {
            access
        } else {
            access & AccessFs::from_file(LANDLOCK_ABI)
        };
        ruleset = ruleset
            .add_rule(PathBeneath::new(fd, access))
            .map_err(failed)?;
    }
    for port in connect {
        ruleset = ruleset
            .add_rule(NetPort::new(*port, AccessNet::ConnectTcp))
            .map_err(failed)?;
    }
    Ok(ruleset)
}

/// The seccomp filters: the system calls a server has no use for (`ptrace`, mounts, new
/// namespaces, BPF, perf, kexec, modules, keyrings) answered `EPERM`; `clone3`, whose flags a
/// filter cannot read, answered `ENOSYS` (the C library then uses `clone`, whose namespace flags
/// are refused). Never a kill or a trap.
fn filters() -> Result<[BpfProgram; 2], String> {
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|_| format!("no seccomp filter for {}", std::env::consts::ARCH))?;
    let denied = [
        libc::SYS_ptrace,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_unshare,
        libc::SYS_setns,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_kexec_load,
        libc::SYS_kexec_file_load,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
    ];
    let mut rules: std::collections::BTreeMap<i64, Vec<SeccompRule>> =
        denied.iter().map(|nr| (*nr, Vec::new())).collect();
    // `clone` with any namespace flag: one rule per flag (a syscall's rules are alternatives).
    let namespaces = [
        libc::CLONE_NEWNS,
        libc::CLONE_NEWCGROUP,
        libc::CLONE_NEWUTS,
        libc::CLONE_NEWIPC,
        libc::CLONE_NEWUSER,
        libc::CLONE_NEWPID,
        libc::CLONE_NEWNET,
        0x80, // CLONE_NEWTIME
    ];
    let clone_rules = namespaces
        .iter()
        .map(|flag| *flag as u64)
        .map(|flag| {
            SeccompCondition::new(
                0,
                SeccompCmpArgLen::Qword,
                SeccompCmpOp::MaskedEq(flag),
                flag,
            )
            .and_then(|condition| SeccompRule::new(vec![condition]))
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| error.to_string())?;
    rules.insert(libc::SYS_clone, clone_rules);
    let eperm = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|error| error.to_string())?;
    let enosys = SeccompFilter::new(
        [(libc::SYS_clone3, Vec::new())].into(),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )
    .map_err(|error| error.to_string())?;
    Ok([
        eperm
            .try_into()
            .map_err(|e: seccompiler::BackendError| e.to_string())?,
        enosys
            .try_into()
            .map_err(|e: seccompiler::BackendError| e.to_string())?,
    ])
}
