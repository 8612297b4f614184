//! The formats runs are exported in, and one run as one file of either (what the API serves
//! for a single run).

use anyhow::Result;

use super::export::RunExport;
use super::{atif, inspect};

/// The formats runs are exported in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// ATIF v1.7 trajectories (Harbor / Terminal-Bench).
    Atif,
    /// Inspect eval logs.
    Inspect,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Format, String> {
        match s {
            "atif" => Ok(Format::Atif),
            "inspect" => Ok(Format::Inspect),
            other => Err(format!("unknown export format `{other}`; use `atif` or `inspect`")),
        }
    }
}

/// One run as one file in `format`: its bytes, media type and file name (an ATIF trajectory,
/// or an Inspect `.eval` log).
pub fn single_file(run: &RunExport, format: Format) -> Result<(Vec<u8>, &'static str, String)> {
    Ok(match format {
        Format::Atif => (atif::bytes(run), "application/json", format!("{}.trajectory.json", run.run_id)),
        Format::Inspect => {
            let task = run.task();
            let runs = std::slice::from_ref(run);
            let enc = inspect::Encoding::Eval;
            (inspect::log_bytes(&task, runs, enc)?, "application/zip", inspect::file_name(&task, runs, enc))
        }
    })
}
