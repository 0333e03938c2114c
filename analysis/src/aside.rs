//! Products written aside: each is written as `.NAME.partial` beside its
//! final name and renamed over it once whole, so no reader ever sees one
//! half-written. The process knows every one being written: at an interrupt
//! [`abandon`] removes them and refuses new ones, so whatever the moment of
//! the signal, each product is whole (the new one or the previous one) or
//! absent. Creating and committing take one lock, which [`abandon`] takes
//! too: a rename is never cut in two, and nothing is created after it.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

struct Registry {
    /// Set by [`abandon`]: nothing more is created or committed.
    closed: bool,
    /// The partial files and directories being written.
    open: Vec<PathBuf>,
}

/// The registry of the process. A unit test's is its thread's: the tests
/// of this crate run side by side in one process, and one test's
/// [`abandon`] must not close the others'.
#[cfg(not(test))]
static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    closed: false,
    open: Vec::new(),
});

#[cfg(test)]
thread_local! {
    static REGISTRY: &'static Mutex<Registry> = Box::leak(Box::new(Mutex::new(Registry {
        closed: false,
        open: Vec::new(),
    })));
}

fn registry() -> MutexGuard<'static, Registry> {
    #[cfg(not(test))]
    let r: &'static Mutex<Registry> = &REGISTRY;
    #[cfg(test)]
    let r: &'static Mutex<Registry> = REGISTRY.with(|r| *r);
    r.lock().unwrap_or_else(|p| p.into_inner())
}

/// The error of a product refused because the process is leaving.
fn interrupted() -> io::Error {
    io::Error::new(io::ErrorKind::Interrupted, "interrupted: not written")
}

/// `.NAME.partial` beside `path`.
fn partial_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map_or_else(|| "product".into(), |n| n.to_string_lossy().into_owned());
    path.with_file_name(format!(".{name}.partial"))
}

/// A product being written aside; dropped uncommitted (an error), its
/// partial file or directory is removed and the previous product stays.
#[derive(Debug)]
pub struct Aside {
    tmp: PathBuf,
    path: PathBuf,
    done: bool,
    /// A directory whose files are moved beside it, not renamed whole: the
    /// files' names, and files there that go (see [`Aside::move_files`]).
    moves: Option<(Vec<String>, Vec<PathBuf>)>,
}

impl Aside {
    /// A file for `path`, created (or truncated) at its partial path.
    pub fn file(path: &Path) -> io::Result<(Aside, std::fs::File)> {
        let tmp = partial_path(path);
        let file = begin(&tmp, || std::fs::File::create(&tmp))?;
        Ok((Aside::new(tmp, path), file))
    }

    /// A directory for `path`, created empty at its partial path: its
    /// files are written into [`Aside::tmp`].
    pub fn dir(path: &Path) -> io::Result<Aside> {
        let tmp = partial_path(path);
        begin(&tmp, || {
            let _ = std::fs::remove_dir_all(&tmp);
            std::fs::create_dir_all(&tmp)
        })?;
        Ok(Aside::new(tmp, path))
    }

    fn new(tmp: PathBuf, path: &Path) -> Aside {
        Aside {
            tmp,
            path: path.to_path_buf(),
            done: false,
            moves: None,
        }
    }

    /// Where the product is being written.
    pub fn tmp(&self) -> &Path {
        &self.tmp
    }

    /// A directory committed by moving its files `names` into the
    /// directory it stands in (the run's plots), where `stale` files go.
    pub fn move_files(mut self, names: Vec<String>, stale: Vec<PathBuf>) -> Aside {
        self.moves = Some((names, stale));
        self
    }

    /// Puts the product in place (see [`commit_together`]).
    pub fn commit(self) -> io::Result<()> {
        commit_together(vec![self])
    }

    /// The file renamed over the previous one; a directory replacing the
    /// previous one, or its files moved (see [`Aside::move_files`]).
    fn put(&self) -> io::Result<()> {
        // Named by the product: "Is a directory" alone, beside the run
        // directory, did not say which file stood in the way.
        self.put_unnamed()
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", self.path.display())))
    }

    fn put_unnamed(&self) -> io::Result<()> {
        match &self.moves {
            Some((names, stale)) => {
                let into = self.path.parent().unwrap_or(Path::new("."));
                for name in names {
                    std::fs::rename(self.tmp.join(name), into.join(name))?;
                }
                for path in stale {
                    let _ = std::fs::remove_file(path);
                }
                std::fs::remove_dir_all(&self.tmp)
            }
            None => {
                if self.tmp.is_dir() && self.path.is_dir() {
                    std::fs::remove_dir_all(&self.path)?;
                }
                std::fs::rename(&self.tmp, &self.path)
            }
        }
    }
}

/// Puts products in place together, under the lock [`abandon`] takes: an
/// interrupt finds all of them committed or none (products that agree with
/// each other stay so). An error leaves the rest uncommitted (removed).
pub fn commit_together(mut products: Vec<Aside>) -> io::Result<()> {
    let mut r = registry();
    if r.closed {
        return Err(interrupted());
    }
    // A file that cannot replace what stands at its name (a directory)
    // fails before any product is put in place: the set stays the previous
    // one (the page was replaced and the summary refused, a mixed set).
    for a in &products {
        if a.moves.is_none() && a.path.is_dir() && !a.tmp.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                format!(
                    "{}: a directory stands at this product's name",
                    a.path.display()
                ),
            ));
        }
    }
    for a in &mut products {
        a.put()?;
        r.open.retain(|p| p != &a.tmp);
        a.done = true;
    }
    Ok(())
}

impl Drop for Aside {
    fn drop(&mut self) {
        if !self.done {
            let mut r = registry();
            remove(&self.tmp);
            r.open.retain(|p| p != &self.tmp);
        }
    }
}

/// Writes `bytes` to `path` whole or not at all.
pub fn write_whole(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let (aside, mut file) = Aside::file(path)?;
    io::Write::write_all(&mut file, bytes)?;
    drop(file);
    aside.commit()
}

/// Creates the partial `tmp` by `create` unless the process is leaving,
/// and remembers it.
fn begin<T>(tmp: &Path, create: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
    let mut r = registry();
    if r.closed {
        return Err(interrupted());
    }
    let made = create()?;
    r.open.push(tmp.to_path_buf());
    Ok(made)
}

/// Removes a partial file, or a directory: moved out of the way first, so
/// that a file a writer creates in it by its path meanwhile cannot keep it.
fn remove(tmp: &Path) {
    if tmp.is_dir() {
        let gone = tmp.with_extension("gone");
        let at = if std::fs::rename(tmp, &gone).is_ok() {
            gone
        } else {
            tmp.to_path_buf()
        };
        let _ = std::fs::remove_dir_all(at);
    } else {
        let _ = std::fs::remove_file(tmp);
    }
}

/// At an interrupt: removes every product being written and refuses the
/// next ones (creating or committing one fails as interrupted). Returns how
/// many were removed.
pub fn abandon() -> usize {
    let mut r = registry();
    r.closed = true;
    let open = std::mem::take(&mut r.open);
    for tmp in &open {
        remove(tmp);
    }
    open.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One test: [`abandon`] closes the process-wide registry.
    #[test]
    fn products_are_whole_or_absent_across_an_abandon() {
        let dir = std::env::temp_dir().join(format!("h2probe-aside-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        // A committed file replaces the previous one; a dropped one leaves it.
        let target = dir.join("summary.json");
        std::fs::write(&target, "old").unwrap();
        let (a, f) = Aside::file(&target).unwrap();
        drop(f);
        assert!(dir.join(".summary.json.partial").exists());
        drop(a);
        assert!(!dir.join(".summary.json.partial").exists());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "old");
        let (a, mut f) = Aside::file(&target).unwrap();
        std::io::Write::write_all(&mut f, b"new").unwrap();
        a.commit().unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
        // A directory replaces the previous one whole.
        let csv = dir.join("csv");
        std::fs::create_dir_all(&csv).unwrap();
        std::fs::write(csv.join("stale.csv"), "x").unwrap();
        let d = Aside::dir(&csv).unwrap();
        std::fs::write(d.tmp().join("frame.csv"), "t").unwrap();
        d.commit().unwrap();
        assert!(csv.join("frame.csv").exists() && !csv.join("stale.csv").exists());
        // A file whose name a directory holds fails the set before any of
        // it is put in place, naming it.
        let page = dir.join("report.html");
        std::fs::write(&page, "old page").unwrap();
        std::fs::create_dir_all(dir.join("timeline.csv")).unwrap();
        let (a, _f) = Aside::file(&page).unwrap();
        let (b, _g) = Aside::file(&dir.join("timeline.csv")).unwrap();
        let e = commit_together(vec![a, b]).unwrap_err();
        assert!(
            e.to_string().contains("timeline.csv: a directory stands"),
            "{e}"
        );
        assert_eq!(std::fs::read_to_string(&page).unwrap(), "old page");
        std::fs::remove_dir(dir.join("timeline.csv")).unwrap();
        // Abandoned: what is being written goes, nothing new starts, and
        // what is committed stays.
        let (open_file, _f) = Aside::file(&dir.join("windows.csv")).unwrap();
        let open_dir = Aside::dir(&dir.join("plots")).unwrap();
        std::fs::write(open_dir.tmp().join("queue.svg"), "<svg/>").unwrap();
        assert_eq!(abandon(), 2);
        assert!(!dir.join(".windows.csv.partial").exists());
        assert!(!dir.join(".plots.partial").exists() && !dir.join(".plots.gone").exists());
        assert_eq!(
            open_file.commit().unwrap_err().kind(),
            io::ErrorKind::Interrupted
        );
        drop(open_dir);
        assert_eq!(
            Aside::file(&dir.join("report.html")).unwrap_err().kind(),
            io::ErrorKind::Interrupted
        );
        assert!(!dir.join(".report.html.partial").exists());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
        let left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(left.iter().all(|n| !n.ends_with(".partial")), "{left:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
