//! The state file: where it is by default, and its permissions.

use std::path::{Path, PathBuf};

/// Creates `path` (mode 0600) and its directory (0700) when they are missing; refuses a file
/// others may read.
pub(super) fn create_private(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let mode = file.metadata().map(|m| m.permissions().mode()).unwrap_or(0);
    if mode & 0o077 != 0 {
        return Err(format!(
            "{} may be read by other users (mode {:o}); it holds call results and OAuth tokens: `chmod 600 {}`",
            path.display(),
            mode & 0o777,
            path.display()
        ));
    }
    Ok(())
}

/// Where `brain-harness` keeps its state by default: `$XDG_STATE_HOME/brain/state.db`, else
/// `~/.local/state/brain/state.db`.
pub fn default_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|home| PathBuf::from(home).join(".local/state"))
        })?;
    Some(base.join("brain/state.db"))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_state_file_is_private_and_a_readable_one_is_refused() {
        let dir = std::env::temp_dir().join(format!("brain-sqlite-{}", std::process::id()));
        let path = dir.join("state/brain/state.db");
        super::create_private(&path).unwrap();
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let refused = super::create_private(&path).unwrap_err();
        assert!(refused.contains("chmod 600"), "{refused}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
