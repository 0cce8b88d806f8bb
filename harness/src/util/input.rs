//! Reading the files the harness is given — case files, manifests, saved reports — as untrusted
//! input: each is opened without blocking, checked to be a regular file on the opened handle, and
//! read up to a bound, so that `/dev/zero` is not read until memory runs out, a FIFO does not hang
//! the run, and a file that grows while it is read is still cut off at its bound.
//!
//! The bounds, one per kind of file:
//!
//! | file | bound |
//! |---|---|
//! | a file of a cases directory (case YAML, clause lists, `DECISIONS.md`, seeds) | [`MAX_CASE_FILE_BYTES`], 4 MiB |
//! | an expectations manifest (`--expectations`, `expectations --write`) | [`MAX_MANIFEST_BYTES`], 4 MiB |
//! | a saved JSON report (`conformance report FILE`) | [`MAX_REPORT_BYTES`], 64 MiB |
//!
//! A saved report has its own, larger bound: the full corpus's JSON report is about 6.4 MB, and
//! holding it to the case-file bound refused a report the harness had just written.

use std::fmt;
use std::fs;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// The largest file read from a cases directory: 4 MiB.
pub const MAX_CASE_FILE_BYTES: u64 = 4 << 20;

/// The largest expectations manifest: 4 MiB (a manifest lists only the cases expected not to
/// pass, a few hundred bytes each).
pub const MAX_MANIFEST_BYTES: u64 = 4 << 20;

/// The largest saved JSON report: 64 MiB, ten times the full corpus's.
pub const MAX_REPORT_BYTES: u64 = 64 << 20;

/// What is read, for messages and its bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kind {
    /// A file of a cases directory. Its links are not followed: a case directory is read as it
    /// stands (see `case/corpus.rs`).
    CaseFile,
    /// An expectations manifest. A link is followed: the user named the path.
    Manifest,
    /// A saved JSON report. A link is followed: the user named the path.
    Report,
}

impl Kind {
    /// The bound of this kind of file.
    pub fn max_bytes(self) -> u64 {
        match self {
            Kind::CaseFile => MAX_CASE_FILE_BYTES,
            Kind::Manifest => MAX_MANIFEST_BYTES,
            Kind::Report => MAX_REPORT_BYTES,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::CaseFile => "a case file",
            Kind::Manifest => "a manifest",
            Kind::Report => "a saved report",
        }
    }

    fn follows_links(self) -> bool {
        !matches!(self, Kind::CaseFile)
    }
}

/// Why a file was not read.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Nothing is at the path.
    NotFound,
    /// The path is a symbolic link where links are not followed.
    Link,
    /// The path is no regular file (a FIFO, a device, a directory, a socket).
    NotRegular,
    /// The file is larger than its bound.
    TooLarge,
    /// The file is not UTF-8.
    NotUtf8,
    /// The file is not the document it should be (a JSON report that does not parse).
    Parse,
    /// Opening or reading failed otherwise.
    Io,
}

/// A file that was not read: why, in words that follow the path in a message
/// (`FILE: is a FIFO, not a regular file (...)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// Why, as a kind.
    pub kind: ErrorKind,
    /// Why, in words, without the path.
    pub message: String,
}

impl Error {
    /// The kind's stable code (`input.not_regular`, ...).
    pub fn code(&self) -> &'static str {
        match self.kind {
            ErrorKind::NotFound => "input.not_found",
            ErrorKind::Link => "input.link",
            ErrorKind::NotRegular => "input.not_regular",
            ErrorKind::TooLarge => "input.too_large",
            ErrorKind::NotUtf8 => "input.not_utf8",
            ErrorKind::Parse => "input.parse",
            ErrorKind::Io => "input.io",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

fn error(kind: ErrorKind, message: impl Into<String>) -> Error {
    Error { kind, message: message.into() }
}

/// What a file that is not a regular one is, for the message.
fn what_it_is(t: fs::FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "no regular file"
    }
}

fn over(kind: Kind, bytes: u64) -> Error {
    let max = kind.max_bytes();
    error(ErrorKind::TooLarge, format!("is {bytes} bytes, over the {} MiB {} may have", max >> 20, kind.name()))
}

/// Reads `file` as UTF-8 text: a regular file (checked on the opened handle, so a file swapped
/// after a check is still checked), at most `kind`'s bound, opened with `O_NONBLOCK` so that a
/// FIFO or a device never blocks the open, and with `O_NOFOLLOW` where `kind` follows no links.
///
/// # Platform behavior
///
/// POSIX only, like the rest of the harness: the flags are Linux's and every BSD's.
pub fn read_text(file: &Path, kind: Kind) -> Result<String, Error> {
    let (f, max) = open(file, kind)?;
    // The size was checked, but a file may grow between the check and the read (or report a size
    // of 0, as procfs does): the read itself stops one byte past the bound.
    let mut bytes = Vec::new();
    f.take(max + 1).read_to_end(&mut bytes).map_err(|e| error(ErrorKind::Io, format!("cannot read: {e}")))?;
    if bytes.len() as u64 > max {
        return Err(over(kind, bytes.len() as u64));
    }
    String::from_utf8(bytes).map_err(|e| {
        error(
            ErrorKind::NotUtf8,
            format!("is not utf-8 (first invalid byte at offset {})", e.utf8_error().valid_up_to()),
        )
    })
}

/// Reads the JSON document `file` as [`read_text`] reads a text, but streamed: parsed as it is
/// read, never held whole, and never read past `kind`'s bound and one byte. A parse error is
/// [`ErrorKind::Parse`] and says where (`line L column C`); invalid UTF-8 is one too.
pub fn read_json<T: serde::de::DeserializeOwned>(file: &Path, kind: Kind) -> Result<T, Error> {
    let (f, max) = open(file, kind)?;
    struct Counted<R> {
        inner: R,
        read: u64,
    }
    impl<R: Read> Read for Counted<R> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.inner.read(buf)?;
            self.read += n as u64;
            Ok(n)
        }
    }
    let mut counted = Counted { inner: std::io::BufReader::new(f.take(max + 1)), read: 0 };
    let parsed = {
        let mut de = serde_json::Deserializer::from_reader(&mut counted);
        T::deserialize(&mut de).and_then(|v| de.end().map(|()| v))
    };
    // A file that grew past the bound since its size was looked at is refused as too big, whatever
    // the parse of its first bytes made of it.
    if counted.read > max {
        return Err(over(kind, counted.read));
    }
    parsed.map_err(|e| {
        let kind = if e.is_io() { ErrorKind::Io } else { ErrorKind::Parse };
        error(kind, format!("not a JSON report: {}", clip(&e.to_string())))
    })
}

/// Opens `file` for reading as `kind`: without following a link where `kind` follows none, never
/// blocking on a FIFO, a regular file only, and at most `kind`'s bound by its size. Returns the
/// file and the bound.
fn open(file: &Path, kind: Kind) -> Result<(fs::File, u64), Error> {
    let mut flags = libc::O_NONBLOCK | libc::O_CLOEXEC;
    if !kind.follows_links() {
        flags |= libc::O_NOFOLLOW;
    }
    let f = fs::OpenOptions::new().read(true).custom_flags(flags).open(file).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            error(ErrorKind::NotFound, format!("cannot read: {e}"))
        } else if !kind.follows_links() && e.raw_os_error() == Some(libc::ELOOP) {
            error(ErrorKind::Link, "is a symbolic link (links in a cases directory are not followed)")
        } else {
            error(ErrorKind::Io, format!("cannot read: {e}"))
        }
    })?;
    let meta = f.metadata().map_err(|e| error(ErrorKind::Io, format!("cannot read: {e}")))?;
    if !meta.is_file() {
        return Err(error(
            ErrorKind::NotRegular,
            format!("is {}, not a regular file (only regular files are read)", what_it_is(meta.file_type())),
        ));
    }
    let max = kind.max_bytes();
    if meta.len() > max {
        return Err(over(kind, meta.len()));
    }
    Ok((f, max))
}

/// The most bytes of a message about an input that are shown: a parser's message may quote the
/// input, and a 2 MB key made a 2 MB error line.
pub const MAX_MESSAGE_BYTES: usize = 1024;

/// `message`, cut at [`MAX_MESSAGE_BYTES`] (on a character boundary) with a note of what was cut.
pub fn clip(message: &str) -> std::borrow::Cow<'_, str> {
    if message.len() <= MAX_MESSAGE_BYTES {
        return message.into();
    }
    let mut end = MAX_MESSAGE_BYTES;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    let kept = message.get(..end).unwrap_or_default();
    format!("{kept}… ({} more bytes not shown)", message.len() - end).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fifo(dir: &Path) -> std::path::PathBuf {
        let p = dir.join("fifo");
        let mode = rustix::fs::Mode::from_raw_mode(0o600);
        rustix::fs::mknodat(rustix::fs::CWD, &p, rustix::fs::FileType::Fifo, mode, 0).unwrap();
        p
    }

    #[test]
    fn a_fifo_is_refused_without_blocking_by_every_kind() {
        let dir = tempfile::tempdir().unwrap();
        let p = fifo(dir.path());
        for kind in [Kind::CaseFile, Kind::Manifest, Kind::Report] {
            let e = read_text(&p, kind).unwrap_err();
            assert_eq!(e.kind, ErrorKind::NotRegular);
            assert_eq!(e.message, "is a FIFO, not a regular file (only regular files are read)");
        }
    }

    #[test]
    fn a_device_is_refused_and_a_link_followed_only_where_the_user_named_it() {
        let e = read_text(Path::new("/dev/zero"), Kind::Manifest).unwrap_err();
        assert_eq!(e.message, "is a character device, not a regular file (only regular files are read)");
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("m.yaml"), "x").unwrap();
        std::os::unix::fs::symlink("m.yaml", dir.path().join("link")).unwrap();
        assert_eq!(read_text(&dir.path().join("link"), Kind::Manifest).unwrap(), "x");
        assert_eq!(read_text(&dir.path().join("link"), Kind::CaseFile).unwrap_err().kind, ErrorKind::Link);
        std::os::unix::fs::symlink("/dev/zero", dir.path().join("zero")).unwrap();
        assert_eq!(read_text(&dir.path().join("zero"), Kind::Report).unwrap_err().kind, ErrorKind::NotRegular);
    }

    /// Each kind has its bound: a sparse file one byte over it is refused by its size, unread.
    #[rstest::rstest]
    #[case::case_file(Kind::CaseFile, "is 4194305 bytes, over the 4 MiB a case file may have")]
    #[case::manifest(Kind::Manifest, "is 4194305 bytes, over the 4 MiB a manifest may have")]
    #[case::report(Kind::Report, "is 67108865 bytes, over the 64 MiB a saved report may have")]
    fn a_file_over_its_bound_is_refused(#[case] kind: Kind, #[case] want: &str) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("big");
        let f = std::fs::File::create(&p).unwrap();
        f.set_len(kind.max_bytes() + 1).unwrap();
        let e = read_text(&p, kind).unwrap_err();
        assert_eq!((e.kind, e.message.as_str()), (ErrorKind::TooLarge, want));
        f.set_len(kind.max_bytes()).unwrap();
        assert!(read_text(&p, kind).is_ok());
    }

    #[test]
    fn a_file_that_reports_no_size_is_still_bounded() {
        // procfs reports a size of 0 for a file with content: the read is bounded, not the stat.
        let text = read_text(Path::new("/proc/self/status"), Kind::Manifest).unwrap();
        assert!(text.contains("Name:"));
    }

    #[test]
    fn a_long_message_is_clipped_on_a_character_boundary() {
        assert_eq!(clip("short"), "short");
        let long = format!("a{}", "é".repeat(1000));
        let clipped = clip(&long);
        assert!(clipped.starts_with(&long[..1023]) && clipped.ends_with("… (978 more bytes not shown)"), "{clipped}");
    }

    #[test]
    fn a_json_report_is_read_streamed_within_the_same_bounds() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.json");
        std::fs::write(&p, "{\"a\": [1, 2]}\n").unwrap();
        let v: serde_json::Value = read_json(&p, Kind::Report).unwrap();
        assert_eq!(v["a"][1], 2);
        // Where it does not parse, and what follows a document.
        std::fs::write(&p, "{\"a\":\n  [1, }").unwrap();
        let e = read_json::<serde_json::Value>(&p, Kind::Report).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Parse);
        assert!(e.message.contains("line 2 column"), "{}", e.message);
        std::fs::write(&p, "{} {}").unwrap();
        assert_eq!(read_json::<serde_json::Value>(&p, Kind::Report).unwrap_err().kind, ErrorKind::Parse);
        // A FIFO, a device and a file past the bound are refused as read_text refuses them.
        let e = read_json::<serde_json::Value>(&fifo(dir.path()), Kind::Report).unwrap_err();
        assert_eq!(e.kind, ErrorKind::NotRegular);
        let e = read_json::<serde_json::Value>(Path::new("/dev/zero"), Kind::Report).unwrap_err();
        assert_eq!(e.kind, ErrorKind::NotRegular);
        let big = std::fs::File::create(&p).unwrap();
        big.set_len(Kind::Report.max_bytes() + 1).unwrap();
        assert_eq!(read_json::<serde_json::Value>(&p, Kind::Report).unwrap_err().kind, ErrorKind::TooLarge);
    }

    #[test]
    fn a_missing_file_and_bad_utf8_are_named() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_text(&dir.path().join("none"), Kind::Manifest).unwrap_err().kind, ErrorKind::NotFound);
        std::fs::write(dir.path().join("bin"), b"ab\xff").unwrap();
        let e = read_text(&dir.path().join("bin"), Kind::CaseFile).unwrap_err();
        assert_eq!(e.message, "is not utf-8 (first invalid byte at offset 2)");
    }
}
