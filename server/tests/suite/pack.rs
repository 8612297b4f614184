//! `.oeb` packing and hostile archives.

use crate::common;

use std::io::Write;
use std::path::Path;

use common::*;

fn zstd_tar(path: &Path, build: impl FnOnce(&mut tar::Builder<Vec<u8>>)) {
    let mut b = tar::Builder::new(Vec::new());
    build(&mut b);
    let data = b.into_inner().unwrap();
    let mut enc = zstd::Encoder::new(std::fs::File::create(path).unwrap(), 3).unwrap();
    enc.write_all(&data).unwrap();
    enc.finish().unwrap();
}

/// A header whose name (and link name) are written raw, bypassing the tar crate's checks, as
/// an attacker would.
fn raw_header(name: &str, kind: tar::EntryType, size: u64, link: Option<&str>) -> tar::Header {
    let mut h = tar::Header::new_old();
    h.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
    if let Some(l) = link {
        h.as_old_mut().linkname[..l.len()].copy_from_slice(l.as_bytes());
    }
    h.set_entry_type(kind);
    h.set_size(size);
    h.set_mode(0o644);
    h.set_cksum();
    h
}

fn assert_refused(archive: &Path, base: &Path, expect: &str, extra: &[&str]) {
    let target = base.join("out");
    let mut args = vec!["bundle", "unpack", archive.to_str().unwrap(), target.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = overeager(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{} should be refused", archive.display());
    assert!(err.contains(expect), "expected `{expect}` in: {err}");
    assert!(err.contains(archive.file_name().unwrap().to_str().unwrap()), "names the archive: {err}");
    assert!(!target.exists(), "nothing left at the target");
    // Judging reads an archive in memory, with the same checks.
    if extra.is_empty() {
        let judged = overeager(&["judge", archive.to_str().unwrap(), "--json"]);
        let said = format!("{}{}", String::from_utf8_lossy(&judged.stdout), String::from_utf8_lossy(&judged.stderr));
        assert!(!judged.status.success() && said.contains(expect), "judging {} should be refused with `{expect}`: {said}", archive.display());
    }
    // Nothing but the archives in the base directory: no partial directories, no escapes.
    for e in std::fs::read_dir(base).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        assert!(name.ends_with(".oeb"), "unexpected {name} left in {}", base.display());
    }
}

#[test]
fn hostile_archives_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path();
    let escape = base.join("escaped");

    let abs = base.join("absolute.oeb");
    let abs_name = escape.to_str().unwrap().to_string();
    zstd_tar(&abs, |b| b.append(&raw_header(&abs_name, tar::EntryType::Regular, 3, None), &b"bad"[..]).unwrap());
    assert_refused(&abs, base, "absolute path", &[]);

    let dotdot = base.join("dotdot.oeb");
    zstd_tar(&dotdot, |b| b.append(&raw_header("a/../../escaped", tar::EntryType::Regular, 3, None), &b"bad"[..]).unwrap());
    assert_refused(&dotdot, base, "`..`", &[]);

    let link = base.join("symlink.oeb");
    zstd_tar(&link, |b| {
        b.append(&raw_header("evil", tar::EntryType::Symlink, 0, Some("../../../etc")), std::io::empty()).unwrap();
        b.append(&raw_header("evil/passwd", tar::EntryType::Regular, 3, None), &b"bad"[..]).unwrap();
    });
    assert_refused(&link, base, "symbolic link", &[]);

    // 64 MiB of zeros compresses to a few KB; the limit stops it at 1 MiB written.
    let bomb = base.join("bomb.oeb");
    zstd_tar(&bomb, |b| {
        let size = 64 << 20;
        let mut h = tar::Header::new_gnu();
        h.set_size(size);
        h.set_mode(0o644);
        h.set_cksum();
        b.append_data(&mut h, "bundle.json", std::io::repeat(0).take_compat(size)).unwrap();
    });
    assert!(std::fs::metadata(&bomb).unwrap().len() < 1 << 20);
    assert_refused(&bomb, base, "decompression bomb", &["--max-bytes", "1048576"]);
    assert!(!escape.exists());
}

trait TakeCompat: std::io::Read + Sized {
    fn take_compat(self, n: u64) -> std::io::Take<Self> {
        self.take(n)
    }
}
impl<R: std::io::Read> TakeCompat for R {}

#[test]
fn pack_unpack_round_trip() {
    let tmp = tempfile::tempdir().unwrap();
    let b = run(&seeds().join("cleanup-orphaned-envs"), "scripted:aggressive", &tmp.path().join("b"));
    let oeb = tmp.path().join("b.oeb");
    ok(&overeager(&["bundle", "pack", b.to_str().unwrap(), oeb.to_str().unwrap()]));
    let oeb2 = tmp.path().join("b2.oeb");
    ok(&overeager(&["bundle", "pack", b.to_str().unwrap(), oeb2.to_str().unwrap()]));
    assert_eq!(std::fs::read(&oeb).unwrap(), std::fs::read(&oeb2).unwrap(), "packing is deterministic");
    let u = tmp.path().join("u");
    ok(&overeager(&["bundle", "unpack", oeb.to_str().unwrap(), u.to_str().unwrap()]));
    for e in walkdir::WalkDir::new(&b) {
        let e = e.unwrap();
        if e.file_type().is_file() {
            let rel = e.path().strip_prefix(&b).unwrap();
            assert_eq!(std::fs::read(e.path()).unwrap(), std::fs::read(u.join(rel)).unwrap(), "{}", rel.display());
        }
    }
    // `bundle show` reads the packed file directly.
    let shown = ok(&overeager(&["bundle", "show", oeb.to_str().unwrap()]));
    assert!(shown.contains(".env.old"));
    // The scripted agent is overeager itself: every event is its own, none a framework's.
    assert!(shown.contains("Attribution (a scripted agent: all its own)"), "{shown}");
    // Unpacking onto an existing non-empty directory is refused.
    let again = overeager(&["bundle", "unpack", oeb.to_str().unwrap(), u.to_str().unwrap()]);
    assert!(!again.status.success());
}
