//! Agent-channel adapters: each turns one real agent's native event stream into normalized
//! agent-channel [`Event`]s, and finds the tool calls in it ([`calls`]). The raw stream stays
//! in the bundle (`agent.jsonl`), so an improved adapter can re-derive the events; anything an
//! adapter does not recognize becomes an `unknown` event, never an error.
//!
//! Everything that knows a format is in its module, which ends in a [`StreamFormat`] named
//! `FORMAT`; [`FORMATS`] lists them. A new format is a module and a line in that table (see
//! `agents/FORMAT.md`). Claude Code's module also writes the format (the scripted agent
//! does); the Agent Client Protocol's reads any agent overeager drives over ACP.

pub mod acp;
pub mod aider;
pub mod calls;
pub mod claude;
pub mod cline;
pub mod codex;
pub mod continue_cli;
pub mod gemini;
pub mod mini;
pub mod opencode;
pub mod openhands;
pub(crate) mod parse;

pub use parse::{iso8601, iso_us};

use overeager_core::event::{Channel, Event, Op};
use overeager_core::paths::Roots;

/// What a stream format is, as its module defines it.
pub struct StreamFormat {
    /// The name agents' definitions and cells use (`codex`).
    pub name: &'static str,
    /// Other framework names that write it (`codex-cli`).
    pub aliases: &'static [&'static str],
    /// The agent versions the adapter was written against.
    pub target_versions: &'static str,
    /// The stream as normalized agent-channel events.
    pub normalize: fn(&str, &Roots) -> Vec<Event>,
    /// The stream's tool calls with their ids, arguments and outputs.
    pub tool_calls: fn(&str) -> calls::Calls,
    /// The agent carries out the model's last reply after its last request (see
    /// [`Format::acts_after_last_request`]).
    pub acts_after_last_request: bool,
}

/// The formats overeager reads, in a fixed order. A new format: its module, and a line here.
pub const FORMATS: &[StreamFormat] = &[
    claude::FORMAT,
    codex::FORMAT,
    gemini::FORMAT,
    openhands::FORMAT,
    opencode::FORMAT,
    acp::FORMAT,
    cline::FORMAT,
    mini::FORMAT,
    continue_cli::FORMAT,
    aider::FORMAT,
];

/// One of the [`FORMATS`].
#[derive(Clone, Copy)]
pub struct Format(&'static StreamFormat);

impl PartialEq for Format {
    fn eq(&self, other: &Format) -> bool {
        self.0.name == other.0.name
    }
}

impl Eq for Format {}

impl std::fmt::Debug for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.name)
    }
}

impl Format {
    /// Claude Code's stream-json, which the scripted agent writes.
    pub const CLAUDE_CODE: Format = Format(&FORMATS[0]);

    /// Every format, in [`FORMATS`] order.
    pub fn all() -> impl Iterator<Item = Format> {
        FORMATS.iter().map(Format)
    }

    /// The format of this name (not an alias).
    pub fn named(name: &str) -> Option<Format> {
        Format::all().find(|f| f.as_str() == name)
    }

    /// The format's name as agents and cells use it.
    pub fn as_str(self) -> &'static str {
        self.0.name
    }

    /// The agent versions the adapter was written against.
    pub fn target_versions(self) -> &'static str {
        self.0.target_versions
    }

    /// The format of the stream a run's agent writes, from what its manifest records: the
    /// adapter a real agent's definition names, else the one its cell implies (overeager's own
    /// players, scripted and simulated, write Claude Code's stream-json).
    pub fn of_agent(agent: &overeager_core::bundle::AgentRef) -> Option<Format> {
        agent.adapter.as_deref().and_then(Format::for_framework).or_else(|| match agent.cell().ok()? {
            cell if cell.is_harness() => Some(Format::CLAUDE_CODE),
            cell => Format::for_framework(cell.name()),
        })
    }

    /// The format of a framework name: its own or an alias (`scripted` agents write Claude
    /// Code's format).
    pub fn for_framework(framework: &str) -> Option<Format> {
        Format::all().find(|f| f.0.name == framework || f.0.aliases.contains(&framework))
    }

    /// Whether an agent of this format carries out the model's last reply after its last
    /// request: Aider acts on a whole reply (edits, then commands) and exits without asking
    /// again, so the model's actions run on after the last request rather than before it.
    pub fn acts_after_last_request(self) -> bool {
        self.0.acts_after_last_request
    }

    /// Normalizes a transcript of this format.
    pub fn normalize(self, transcript: &str, roots: &Roots) -> Vec<Event> {
        (self.0.normalize)(transcript, roots)
    }

    /// The tool calls of a transcript of this format. Lines it does not understand are passed
    /// over: the normalized events remain the record of what happened.
    pub fn tool_calls(self, transcript: &str) -> calls::Calls {
        (self.0.tool_calls)(transcript)
    }
}

/// One main-loop turn of the model channel: when the request came, and the tool call the
/// agent refused before running it, if it did, as only the model was told.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelTurn {
    pub t_us: u64,
    pub refused: Option<Refusal>,
}

/// A tool call refused without a word on the agent's own stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub tool: String,
    pub command: Option<String>,
    pub reason: String,
}

/// Lines the agent's stream up with the model channel. The k-th tool call is the reply to
/// main-loop turn k: calls refused before they ran (Codex 0.1xx rejects `rm -f` style
/// commands and tells only the model) are put back as `denied` events in their place, and a
/// stream without times of its own (Claude Code's and Codex's carry none) takes the turns'
/// times: a call its turn's, the start the first turn's, messages and the result the time of
/// the turn they follow.
pub fn align_with_model(events: &mut Vec<Event>, turns: &[ModelTurn]) {
    if turns.is_empty() {
        return;
    }
    let untimed = events.iter().all(|e| e.t_us == 0);
    let denied = |t: &ModelTurn, r: &Refusal| {
        // Not on the agent's stream: `raw` points at its first line, the text says where the
        // refusal is recorded.
        let mut e = Event::new(Channel::Agent, Op::Denied, t.t_us, 0);
        e.tool = Some(r.tool.clone());
        e.command = r.command.clone();
        e.ok = Some(false);
        e.text = Some(format!("{} (told only to the model: model.jsonl)", r.reason.chars().take(400).collect::<String>()));
        e
    };
    let mut out = Vec::with_capacity(events.len() + 2);
    let mut k = 0usize;
    let mut last = turns[0].t_us;
    let flush = |k: &mut usize, out: &mut Vec<Event>, last: &mut u64| {
        while let Some(t) = turns.get(*k).filter(|t| t.refused.is_some()) {
            out.push(denied(t, t.refused.as_ref().expect("filtered")));
            *last = (*last).max(t.t_us);
            *k += 1;
        }
    };
    for mut e in events.drain(..) {
        match e.op {
            Op::Start => {
                if untimed {
                    e.t_us = turns[0].t_us;
                }
            }
            Op::Message | Op::Result | Op::Unknown => {
                if matches!(e.op, Op::Result) {
                    flush(&mut k, &mut out, &mut last);
                }
                if untimed {
                    e.t_us = last;
                }
            }
            _ => {
                flush(&mut k, &mut out, &mut last);
                if untimed {
                    e.t_us = turns.get(k).map_or(last, |t| t.t_us).max(last);
                    last = e.t_us;
                }
                k += 1;
            }
        }
        out.push(e);
    }
    flush(&mut k, &mut out, &mut last);
    // Refusals carry the turn's time: in a timed stream they go where their time puts them.
    if !untimed {
        out.sort_by_key(|e| e.t_us);
    }
    *events = out;
}

#[cfg(test)]
mod tests {
    use super::*;
    use super::parse::{exit_code_after, iso_us};

    #[test]
    fn iso8601_matches_known_instants_and_parses_back() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000000Z");
        assert_eq!(iso8601(951_782_400_000_001), "2000-02-29T00:00:00.000001Z");
        assert_eq!(iso8601(1_795_548_902_089_693), "2026-11-24T19:35:02.089693Z");
        for t in [0, 1, 59_999_999, 951_782_399_999_999, 4_102_444_800_000_000, 1_795_548_902_089_693] {
            assert_eq!(iso_us(&iso8601(t)), Some(t));
        }
    }

    #[test]
    fn iso_times_parse_to_unix_microseconds() {
        assert_eq!(iso_us("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(iso_us("2025-10-10T12:00:00.5Z"), Some(1_760_097_600_500_000));
        assert_eq!(iso_us("2024-02-29T23:59:59.123456"), Some(1_709_251_199_123_456));
        assert_eq!(iso_us("2025-10-10T14:00:00+02:00"), Some(1_760_097_600_000_000));
        assert_eq!(iso_us("yesterday"), None);
    }

    #[test]
    fn exit_codes_are_found_after_their_label() {
        assert_eq!(exit_code_after("Output: x\nExit Code: 2\n", "Exit Code:"), Some(2));
        assert_eq!(exit_code_after("nothing", "Exit Code:"), None);
    }

    fn turns(times: &[u64]) -> Vec<ModelTurn> {
        times.iter().map(|&t_us| ModelTurn { t_us, refused: None }).collect()
    }

    #[test]
    fn untimed_streams_take_the_model_channels_times() {
        let mut ev: Vec<Event> = [Op::Start, Op::Exec, Op::Message, Op::Read, Op::Result].iter().map(|&op| Event::new(Channel::Agent, op, 0, 0)).collect();
        align_with_model(&mut ev, &turns(&[100, 200, 300]));
        let times: Vec<u64> = ev.iter().map(|e| e.t_us).collect();
        assert_eq!(times, [100, 100, 100, 200, 200]);
        let mut timed = vec![Event::new(Channel::Agent, Op::Exec, 7, 0)];
        align_with_model(&mut timed, &turns(&[100]));
        assert_eq!(timed[0].t_us, 7, "a stream's own times win");
    }

    #[test]
    fn calls_refused_before_they_ran_are_put_back_in_their_place() {
        let mut ev: Vec<Event> = [Op::Start, Op::Exec, Op::Exec, Op::Message, Op::Result].iter().map(|&op| Event::new(Channel::Agent, op, 0, 0)).collect();
        let mut t = turns(&[100, 200, 300, 400, 500]);
        t[1].refused = Some(Refusal { tool: "exec_command".into(), command: Some("rm -f a".into()), reason: "rejected: rm -f style commands are not permitted".into() });
        t[2].refused = Some(Refusal { tool: "exec_command".into(), command: Some("rm -f b".into()), reason: "rejected".into() });
        align_with_model(&mut ev, &t);
        let got: Vec<(Op, u64)> = ev.iter().map(|e| (e.op, e.t_us)).collect();
        assert_eq!(got, [(Op::Start, 100), (Op::Exec, 100), (Op::Denied, 200), (Op::Denied, 300), (Op::Exec, 400), (Op::Message, 400), (Op::Result, 400)]);
        assert_eq!(ev[2].command.as_deref(), Some("rm -f a"));
    }

    #[test]
    fn frameworks_name_their_format() {
        let names: std::collections::BTreeSet<&str> = Format::all().map(Format::as_str).collect();
        assert_eq!(names.len(), FORMATS.len(), "every format has a name of its own");
        for f in Format::all() {
            assert_eq!(Format::for_framework(f.as_str()), Some(f));
            assert_eq!(Format::named(f.as_str()), Some(f));
            assert!(!f.target_versions().is_empty());
            for a in f.0.aliases {
                assert_eq!(Format::for_framework(a), Some(f));
                assert!(!names.contains(a), "{a}: an alias is no other format's name");
            }
        }
        assert_eq!(Format::for_framework("scripted"), Some(Format::CLAUDE_CODE));
        assert_eq!(Format::for_framework("sim-ask"), None);
        assert_eq!(Format::all().filter(|f| f.acts_after_last_request()).map(Format::as_str).collect::<Vec<_>>(), ["aider"]);
    }
}
