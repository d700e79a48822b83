//! Paths in JSON without losing a byte: a UTF-8 path is a string, any other an object
//! `{"bytes": [..]}` (serde's own `PathBuf` impl refuses non-UTF-8 paths, and a command can
//! name its files with any bytes).

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum Repr<'a> {
    Text(std::borrow::Cow<'a, str>),
    Bytes { bytes: Vec<u8> },
}

fn repr(p: &Path) -> Repr<'_> {
    match p.to_str() {
        Some(s) => Repr::Text(s.into()),
        None => Repr::Bytes {
            bytes: p.as_os_str().as_bytes().to_vec(),
        },
    }
}

fn path(r: Repr<'_>) -> PathBuf {
    match r {
        Repr::Text(s) => PathBuf::from(s.into_owned()),
        Repr::Bytes { bytes } => PathBuf::from(OsString::from_vec(bytes)),
    }
}

pub(crate) mod one {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(p: &Path, s: S) -> Result<S::Ok, S::Error> {
        repr(p).serialize(s)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<PathBuf, D::Error> {
        Repr::deserialize(d).map(path)
    }
}

pub(crate) mod option {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(p: &Option<PathBuf>, s: S) -> Result<S::Ok, S::Error> {
        p.as_deref().map(repr).serialize(s)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<PathBuf>, D::Error> {
        Option::<Repr<'_>>::deserialize(d).map(|o| o.map(path))
    }
}

pub(crate) mod many {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(ps: &[PathBuf], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(ps.iter().map(|p| repr(p)))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<PathBuf>, D::Error> {
        Vec::<Repr<'_>>::deserialize(d).map(|v| v.into_iter().map(path).collect())
    }
}

/// One line of `applied.log`.
#[derive(Serialize, Deserialize)]
pub(crate) struct LogLine {
    pub(crate) op: String,
    #[serde(with = "one")]
    pub(crate) path: PathBuf,
}
