//! The tool calls of an agent's native stream, with what normalized events leave out (the
//! call's id, its full arguments, the output the agent saw), as each format's adapter finds
//! them. Each call is keyed by the raw line of `agent.jsonl` its event(s) came from, and its
//! position among that line's calls.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use super::parse::json_lines;

/// One tool call as the agent's stream records it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolIo {
    /// The agent's id for the call (a synthetic one when its stream has none).
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The call's arguments, as the agent passed them.
    pub arguments: Value,
    /// What the tool returned to the agent, when the stream has it.
    pub output: Option<String>,
    /// The tool reported an error.
    pub error: bool,
}

/// The calls of a stream, by (raw line, position among that line's calls).
pub type Calls = BTreeMap<(u64, usize), ToolIo>;

/// Calls as they are found, and where each id's call is.
#[derive(Default)]
pub struct Collector {
    pub calls: Calls,
    by_id: HashMap<String, (u64, usize)>,
}

impl Collector {
    /// A call on raw line `raw` (its id made up from its place when the stream has none).
    pub fn put(&mut self, raw: u64, id: Option<String>, name: &str, arguments: Value) {
        let pos = self.calls.range((raw, 0)..(raw + 1, 0)).count();
        let id = id.unwrap_or_else(|| format!("call-{raw}-{pos}"));
        self.by_id.insert(id.clone(), (raw, pos));
        self.calls.insert((raw, pos), ToolIo { id, name: name.to_string(), arguments, output: None, error: false });
    }

    /// Whether call `id` was seen.
    pub fn knows(&self, id: &str) -> bool {
        self.by_id.contains_key(id)
    }

    /// Call `id`, to complete.
    pub fn get_mut(&mut self, id: &str) -> Option<&mut ToolIo> {
        self.by_id.get(id).and_then(|k| self.calls.get_mut(k))
    }

    /// Attaches an output (when there is one) and an error flag to call `id`.
    pub fn set_output(&mut self, id: &str, output: Option<String>, error: bool) {
        if let Some(call) = self.get_mut(id) {
            if output.is_some() {
                call.output = output;
            }
            call.error |= error;
        }
    }
}

/// The calls of a JSON-lines stream, each object line handed to `line` with its raw index.
/// Lines that are not JSON objects are passed over.
pub fn json_calls(transcript: &str, line: fn(&mut Collector, u64, &Value)) -> Calls {
    let mut c = Collector::default();
    for (raw, v) in json_lines(transcript) {
        if let Some(v) = v.filter(Value::is_object) {
            line(&mut c, raw, &v);
        }
    }
    c.calls
}
