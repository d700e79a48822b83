//! The host as the native planner asks it: the workspace's view of it
//! ([`workspace::HostView`]), and what this process may do with cgroups.

pub use workspace::host::{read_text, DirStamp, Entry, HostView, Kind, RealHost};

use crate::cgroup::CgroupFacts;

/// A [`HostView`] that also tells what cgroups this process may use (a fake host: none).
pub trait Host: HostView {
    fn cgroups(&self) -> CgroupFacts {
        CgroupFacts::default()
    }
}

impl Host for RealHost {
    fn cgroups(&self) -> CgroupFacts {
        CgroupFacts::probe()
    }
}
