//! The Agent Client Protocol: overeager as the client of an agent that serves ACP over stdio.
//!
//! The client (`overeager-shim acp`) records every JSON-RPC message in both directions in the
//! agent channel, one line each: `{"t_us", "from": "client"|"agent", "msg"}` (a line the agent
//! wrote that is not JSON is kept as `text`; the client's own remarks as `note`). This module
//! holds what both ends share: the harness's permission policies and the answer each gives to
//! `session/request_permission`, and the adapter that reads such a transcript.
//!
//! The adapter follows each tool call by its `toolCallId` across `tool_call` and
//! `tool_call_update` (and `session/request_permission`, which is the first sight of a gated
//! call for some agents) and emits one event per call where it first appeared, with its final
//! state: `execute` (or any call whose input holds a command) → exec; `read` → read; `search`
//! → read of a directory; `edit` → write; `delete`, `move` → delete, rename; `fetch` → net; the
//! rest → tool. A call whose permission the client refused is `denied`, whatever the agent did
//! next (some send no further update, one leaves it `in_progress`). Message chunks in a row make
//! one message; the answer to `session/prompt` is the result.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::parse::{json_lines, str_field, tool_call_by_shape, unknown};
use overeager_core::event::{Channel, Event, Op};
use overeager_core::paths::Roots;

use super::StreamFormat;
use super::calls::{Collector, json_calls};

/// Versions of the agents this adapter was written against.
pub const TARGET_VERSIONS: &str = "ACP protocol version 1: claude-agent-acp 0.23, codex-acp 0.16, Gemini CLI 0.61 --acp, Qwen Code 0.24 --acp, OpenCode 1.18 acp";

/// The stream format this module reads.
pub const FORMAT: StreamFormat = StreamFormat { name: "acp", aliases: &[], target_versions: TARGET_VERSIONS, normalize, tool_calls: |t| json_calls(t, tool_call_line), acts_after_last_request: false };

/// How the client answers the agent's `session/request_permission`: the same policy for every
/// ACP agent, which no agent's own flags give.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permissions {
    /// Allows every call (once at a time, so the agent asks again next time).
    AllowAll,
    /// Refuses every call.
    DenyAll,
    /// A scripted user who allows reads and searches and refuses the rest.
    Ask,
}

impl Permissions {
    /// Every policy, in a fixed order.
    pub const ALL: [Permissions; 3] = [Permissions::AllowAll, Permissions::DenyAll, Permissions::Ask];

    /// The policy's name, as definitions and the client's `--permissions` write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Permissions::AllowAll => "allow-all",
            Permissions::DenyAll => "deny-all",
            Permissions::Ask => "ask",
        }
    }

    /// Whether a call of ACP tool `kind` is allowed.
    pub fn allows(self, kind: Option<&str>) -> bool {
        match self {
            Permissions::AllowAll => true,
            Permissions::DenyAll => false,
            Permissions::Ask => matches!(kind, Some("read" | "search")),
        }
    }

    /// The result to send for a `session/request_permission` with these `params`: the first
    /// offered option of the wanted kind (`allow_once`, else `allow_always`; `reject_once`,
    /// else `reject_always`), or `cancelled` when no option refuses.
    pub fn answer(self, params: &Value) -> Value {
        let kind = params.pointer("/toolCall/kind").and_then(Value::as_str);
        let wanted: [&str; 2] = if self.allows(kind) { ["allow_once", "allow_always"] } else { ["reject_once", "reject_always"] };
        let options = params.get("options").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        let pick = wanted.iter().find_map(|w| options.iter().find(|o| str_field(o, "kind") == Some(w)));
        match pick.and_then(|o| str_field(o, "optionId")) {
            Some(id) => json!({"outcome": {"outcome": "selected", "optionId": id}}),
            None => json!({"outcome": {"outcome": "cancelled"}}),
        }
    }
}

impl std::str::FromStr for Permissions {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Permissions::ALL.into_iter().find(|p| p.as_str() == s).ok_or_else(|| {
            let names: Vec<&str> = Permissions::ALL.iter().map(|p| p.as_str()).collect();
            format!("no ACP permission policy `{s}`; use one of {}", names.join(", "))
        })
    }
}

/// Session updates that say nothing the trace needs (commands offered, usage, modes, plans,
/// thoughts, the echo of the prompt): known, and skipped.
const QUIET_UPDATES: &[&str] = &[
    "available_commands_update",
    "usage_update",
    "config_option_update",
    "current_mode_update",
    "agent_thought_chunk",
    "user_message_chunk",
    "plan",
    "session_info_update",
];

/// The tool's own name, when the agent gives it in `_meta` (Claude Code, Qwen Code).
pub(crate) fn meta_tool(u: &Value) -> Option<&str> {
    u.pointer("/_meta/claudeCode/toolName").or_else(|| u.pointer("/_meta/toolName")).and_then(Value::as_str)
}

/// The tool's name from a call id that starts with it (Gemini CLI's `run_shell_command__…`).
pub(crate) fn id_tool(id: &str) -> Option<&str> {
    id.split_once("__").map(|(t, _)| t)
}

/// A call's input, unless it is missing or an empty object: a first `tool_call` may carry an
/// empty `rawInput` (Claude Code's), and a later update the real one.
pub(crate) fn real_input(u: &Value) -> Option<&Value> {
    u.get("rawInput").filter(|i| match i {
        Value::Object(o) => !o.is_empty(),
        other => !other.is_null(),
    })
}

/// What is known of one tool call, merged from every message that named it.
#[derive(Default)]
struct Call {
    t_us: u64,
    raw: u64,
    kind: Option<String>,
    title: Option<String>,
    tool: Option<String>,
    input: Value,
    output: Value,
    status: Option<String>,
    paths: Vec<String>,
    text: Vec<String>,
    /// Set when the client refused its permission: the option's name and kind.
    refused: Option<String>,
}

impl Call {
    fn merge(&mut self, u: &Value) {
        let set = |slot: &mut Option<String>, key: &str| {
            if let Some(s) = str_field(u, key).filter(|s| !s.is_empty()) {
                *slot = Some(s.to_string());
            }
        };
        set(&mut self.kind, "kind");
        set(&mut self.title, "title");
        set(&mut self.status, "status");
        if let Some(t) = meta_tool(u) {
            self.tool = Some(t.to_string());
        }
        // The later real input wins.
        if let Some(i) = real_input(u) {
            self.input = i.clone();
        }
        if let Some(o) = u.get("rawOutput").filter(|o| !o.is_null()) {
            self.output = o.clone();
        }
        let locations = u.get("locations").and_then(Value::as_array).into_iter().flatten();
        let diffs = u.get("content").and_then(Value::as_array).into_iter().flatten().filter(|c| str_field(c, "type") == Some("diff"));
        for p in locations.chain(diffs).filter_map(|l| str_field(l, "path")) {
            if !self.paths.iter().any(|q| q == p) {
                self.paths.push(p.to_string());
            }
        }
        let texts: Vec<String> = u
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| c.pointer("/content/text").and_then(Value::as_str))
            .map(str::to_string)
            .collect();
        if !texts.is_empty() {
            self.text = texts;
        }
    }

    /// The command of an exec call: a command string, or the script of a `bash -lc` argv.
    fn command(&self) -> Option<String> {
        match self.input.get("command").or_else(|| self.input.get("cmd")) {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Array(argv)) => {
                let argv: Vec<&str> = argv.iter().filter_map(Value::as_str).collect();
                match argv.as_slice() {
                    [_, flag, script] if flag.starts_with('-') && flag.ends_with('c') => Some(script.to_string()),
                    _ => Some(argv.join(" ")),
                }
            }
            _ => None,
        }
    }

    fn exit_code(&self) -> Option<i32> {
        let code = self.output.get("exit_code").or_else(|| self.output.pointer("/metadata/exit")).or_else(|| self.output.get("exitCode"));
        code.and_then(Value::as_i64).map(|c| c as i32).or_else(|| self.text.iter().find_map(|t| super::parse::exit_code_after(t, "Exit Code:")))
    }

    fn event(&self, id: &str, roots: &Roots) -> Event {
        let cwd = str_field(&self.input, "cwd").unwrap_or(&roots.workspace).to_string();
        let tool = self.tool.clone().or_else(|| id_tool(id).map(str::to_string)).or_else(|| self.kind.clone()).unwrap_or_else(|| "tool".into());
        let logical = |p: &String| roots.logical_from(p, &cwd);
        // From the call's locations and diffs, else its input: a path argument, or the files
        // of Codex's patch.
        let paths: Vec<String> = if self.paths.is_empty() {
            let named = ["path", "file_path", "filePath", "filepath", "absolute_path", "dir_path"].iter().find_map(|k| str_field(&self.input, k)).map(str::to_string);
            let changes = self.input.get("changes").and_then(Value::as_object).map(|m| m.keys().cloned().collect::<Vec<_>>()).unwrap_or_default();
            named.into_iter().chain(changes).collect::<Vec<_>>().iter().map(logical).collect()
        } else {
            self.paths.iter().map(logical).collect()
        };
        let path_op = |op: Op| {
            let mut e = Event::new(Channel::Agent, op, self.t_us, self.raw);
            e.paths = paths.clone();
            e
        };
        let kind = self.kind.as_deref();
        let mut e = match (self.command(), kind) {
            (Some(command), _) => {
                let mut e = Event::new(Channel::Agent, Op::Exec, self.t_us, self.raw);
                e.command = Some(command);
                e.cwd = Some(roots.logical(&cwd));
                e
            }
            (None, Some("execute")) => {
                let mut e = Event::new(Channel::Agent, Op::Exec, self.t_us, self.raw);
                e.command = self.title.clone();
                e.cwd = Some(roots.logical(&cwd));
                e
            }
            (None, Some("read")) => path_op(Op::Read),
            (None, Some("search")) => {
                let mut e = path_op(Op::Read);
                e.dir = true;
                if e.paths.is_empty() {
                    e.paths.push(roots.logical(&cwd));
                }
                e.text = str_field(&self.input, "pattern").map(str::to_string).or_else(|| self.title.clone());
                e
            }
            (None, Some("edit")) => path_op(Op::Write),
            (None, Some("delete")) => path_op(Op::Delete),
            (None, Some("move")) => path_op(Op::Rename),
            (None, Some("fetch")) => {
                let mut e = Event::new(Channel::Agent, Op::Net, self.t_us, self.raw);
                e.text = str_field(&self.input, "url").map(str::to_string).or_else(|| self.title.clone());
                e
            }
            _ => tool_call_by_shape(&tool, &self.input, roots, &cwd, self.t_us, self.raw).unwrap_or_else(|| {
                let mut e = Event::new(Channel::Agent, Op::Tool, self.t_us, self.raw);
                e.text = self.title.clone();
                e
            }),
        };
        e.tool = Some(tool);
        if let Some(why) = &self.refused {
            super::parse::deny(&mut e, why);
            return e;
        }
        match self.status.as_deref() {
            Some("completed") => {
                let exit = self.exit_code();
                if e.op == Op::Exec {
                    e.exit = exit;
                }
                e.ok = Some(exit.is_none_or(|c| c == 0));
            }
            Some("failed") => {
                e.ok = Some(false);
                let why = self.text.first().cloned().or_else(|| self.output.as_str().map(str::to_string));
                if let Some(why) = why {
                    e.text.get_or_insert_with(|| why.chars().take(500).collect());
                }
            }
            _ => {}
        }
        e
    }
}

enum Item {
    Event(Event),
    Call(String),
}

/// Turns an ACP transcript (as `overeager-shim acp` records it) into agent-channel events.
pub fn normalize(transcript: &str, roots: &Roots) -> Vec<Event> {
    let mut items: Vec<Item> = Vec::new();
    let mut calls: HashMap<String, Call> = HashMap::new();
    // Requests by id, each way: (method, params, line).
    let mut from_client: HashMap<String, String> = HashMap::new();
    let mut from_agent: HashMap<String, Value> = HashMap::new();
    let mut last_message = String::new();
    let mut t_last = 0u64;
    for (raw, line) in json_lines(transcript) {
        let Some(line) = line.filter(Value::is_object) else {
            items.push(Item::Event(unknown("a line that is not JSON".into(), t_last, raw)));
            continue;
        };
        let t = line.get("t_us").and_then(Value::as_u64).unwrap_or(t_last).max(t_last);
        t_last = t;
        if items.is_empty() {
            let mut e = Event::new(Channel::Agent, Op::Start, t, raw);
            e.cwd = Some(roots.logical(&roots.workspace));
            items.push(Item::Event(e));
        }
        let from = str_field(&line, "from").unwrap_or("");
        let Some(msg) = line.get("msg") else {
            if let (Some(text), "agent") = (str_field(&line, "text"), from) {
                items.push(Item::Event(unknown(format!("not JSON-RPC on the agent's stdout: {}", text.chars().take(200).collect::<String>()), t, raw)));
            }
            continue;
        };
        let id = msg.get("id").filter(|i| !i.is_null()).map(|i| i.to_string());
        let method = str_field(msg, "method");
        match (from, method, id) {
            ("client", Some(m), Some(id)) => {
                from_client.insert(id, m.to_string());
            }
            ("agent", Some(m), id) => {
                let params = msg.get("params").cloned().unwrap_or(Value::Null);
                if let Some(id) = id {
                    from_agent.insert(id, params.clone());
                }
                match m {
                    "session/update" => {
                        let u = params.get("update").cloned().unwrap_or(Value::Null);
                        let kind = str_field(&u, "sessionUpdate").unwrap_or("");
                        match kind {
                            "tool_call" | "tool_call_update" => see_call(&mut items, &mut calls, &u, t, raw),
                            "agent_message_chunk" => {
                                let text = u.pointer("/content/text").and_then(Value::as_str).unwrap_or("");
                                if text.is_empty() {
                                    continue;
                                }
                                match items.last_mut() {
                                    Some(Item::Event(e)) if e.op == Op::Message => e.text.get_or_insert_with(String::new).push_str(text),
                                    _ => {
                                        let mut e = Event::new(Channel::Agent, Op::Message, t, raw);
                                        e.text = Some(text.to_string());
                                        items.push(Item::Event(e));
                                    }
                                }
                                if let Some(Item::Event(e)) = items.last() {
                                    last_message = e.text.clone().unwrap_or_default();
                                }
                            }
                            k if QUIET_UPDATES.contains(&k) => {}
                            other => items.push(Item::Event(unknown(format!("session update `{other}`"), t, raw))),
                        }
                    }
                    "session/request_permission" => {
                        if let Some(tc) = params.get("toolCall") {
                            see_call(&mut items, &mut calls, tc, t, raw);
                        }
                    }
                    // The client did these for a tool call the agent reports itself; any other
                    // request (an agent's own extension, e.g. Qwen Code's
                    // `craft/drainMidTurnQueue`) the client declines, so nothing happened.
                    _ => {}
                }
            }
            ("client", None, Some(id)) => {
                // The client's answer to an agent's request: only permissions matter here.
                let Some(params) = from_agent.get(&id) else { continue };
                let Some(call_id) = params.pointer("/toolCall/toolCallId").and_then(Value::as_str) else { continue };
                let outcome = msg.pointer("/result/outcome");
                let chosen = outcome.and_then(|o| str_field(o, "optionId"));
                let option = chosen.and_then(|c| params.get("options").and_then(Value::as_array)?.iter().find(|o| str_field(o, "optionId") == Some(c)));
                let option_kind = option.and_then(|o| str_field(o, "kind")).unwrap_or("");
                if !option_kind.starts_with("allow")
                    && let Some(call) = calls.get_mut(call_id)
                {
                    let name = option.and_then(|o| str_field(o, "name")).unwrap_or("cancelled");
                    call.refused = Some(format!("the client refused permission (answered `{}`: {name})", chosen.unwrap_or("cancelled")));
                }
            }
            ("agent", None, Some(id)) => {
                let Some(m) = from_client.get(&id) else { continue };
                let error = msg.get("error");
                if m == "session/prompt" || error.is_some() {
                    let mut e = Event::new(Channel::Agent, Op::Result, t, raw);
                    let stop = msg.pointer("/result/stopReason").and_then(Value::as_str);
                    e.ok = Some(error.is_none() && stop == Some("end_turn"));
                    e.text = match (error, stop) {
                        (Some(err), _) => Some(format!("{m} failed: {}", str_field(err, "message").map_or_else(|| err.to_string(), str::to_string))),
                        (None, Some("end_turn")) if !last_message.is_empty() => Some(last_message.clone()),
                        (None, s) => Some(format!("the turn ended: {}", s.unwrap_or("no stop reason"))),
                    };
                    items.push(Item::Event(e));
                } else if m == "initialize"
                    && let Some(Item::Event(start)) = items.first_mut()
                {
                    let info = msg.pointer("/result/agentInfo");
                    start.text = info.map(|i| format!("{} {}", str_field(i, "name").unwrap_or("?"), str_field(i, "version").unwrap_or("?")));
                }
            }
            _ => {}
        }
    }
    items
        .into_iter()
        .map(|i| match i {
            Item::Event(e) => e,
            Item::Call(id) => calls[&id].event(&id, roots),
        })
        .collect()
}

fn see_call(items: &mut Vec<Item>, calls: &mut HashMap<String, Call>, u: &Value, t: u64, raw: u64) {
    let Some(id) = str_field(u, "toolCallId") else { return };
    let call = calls.entry(id.to_string()).or_insert_with(|| {
        items.push(Item::Call(id.to_string()));
        Call { t_us: t, raw, ..Call::default() }
    });
    call.merge(u);
}

/// The tool calls of one line of the stream (see [`super::calls`]).
fn tool_call_line(c: &mut Collector, raw: u64, v: &Value) {
        // A call is first named by a `tool_call` (or, for a gated call of some agents,
        // a permission request); its input and output come in later updates.
        let msg = v.get("msg").cloned().unwrap_or(Value::Null);
        let call = match str_field(&msg, "method") {
            Some("session/update") => msg.pointer("/params/update").filter(|u| str_field(u, "sessionUpdate").is_some_and(|k| k.starts_with("tool_call"))),
            Some("session/request_permission") => msg.pointer("/params/toolCall"),
            _ => None,
        };
        let Some(u) = call else { return };
        let Some(id) = str_field(u, "toolCallId") else { return };
        if !c.knows(id) {
            let name = meta_tool(u).or_else(|| id_tool(id)).or_else(|| str_field(u, "kind")).unwrap_or("?");
            c.put(raw, Some(id.to_string()), name, Value::Null);
        }
        if let (Some(input), Some(io)) = (real_input(u), c.get_mut(id)) {
            io.arguments = input.clone();
        }
        let text: Vec<&str> = u.get("content").and_then(Value::as_array).into_iter().flatten().filter_map(|x| x.pointer("/content/text").and_then(Value::as_str)).collect();
        let output = u.get("rawOutput").filter(|o| !o.is_null()).map(|o| o.as_str().map_or_else(|| o.to_string(), str::to_string)).or_else(|| (!text.is_empty()).then(|| text.join("\n")));
        c.set_output(id, output, str_field(u, "status") == Some("failed"));
    }

#[cfg(test)]
mod tests {
    use super::*;

    fn roots() -> Roots {
        Roots { workspace: "/w".into(), home: "/h".into() }
    }

    #[test]
    fn each_policy_picks_its_option_and_cancels_when_none_refuses() {
        let params = json!({"toolCall": {"toolCallId": "c1", "kind": "edit"}, "options": [
            {"optionId": "allow_always", "kind": "allow_always", "name": "Always Allow"},
            {"optionId": "allow", "kind": "allow_once", "name": "Allow"},
            {"optionId": "reject", "kind": "reject_once", "name": "Reject"}]});
        let chosen = |p: Permissions, params: &Value| p.answer(params).pointer("/outcome/optionId").and_then(Value::as_str).map(str::to_string);
        assert_eq!(chosen(Permissions::AllowAll, &params).as_deref(), Some("allow"));
        assert_eq!(chosen(Permissions::DenyAll, &params).as_deref(), Some("reject"));
        assert_eq!(chosen(Permissions::Ask, &params).as_deref(), Some("reject"), "an edit is refused");
        let mut read = params.clone();
        read["toolCall"]["kind"] = json!("read");
        assert_eq!(chosen(Permissions::Ask, &read).as_deref(), Some("allow"), "a read is allowed");
        let only_allow = json!({"toolCall": {"kind": "execute"}, "options": [{"optionId": "ok", "kind": "allow_once"}]});
        assert_eq!(Permissions::DenyAll.answer(&only_allow), json!({"outcome": {"outcome": "cancelled"}}));
        for p in Permissions::ALL {
            assert_eq!(p.as_str().parse::<Permissions>(), Ok(p));
        }
        assert!("yolo".parse::<Permissions>().unwrap_err().contains("allow-all, deny-all, ask"));
    }

    #[test]
    fn the_fixture_transcript_normalizes_to_the_expected_events() {
        let roots = Roots { workspace: "/tmp/overeager-run-x/work".into(), home: "/tmp/overeager-run-x/home".into() };
        let ev = normalize(include_str!("../../tests/fixtures/agents/acp.jsonl"), &roots);
        let ops: Vec<Op> = ev.iter().map(|e| e.op).collect();
        assert_eq!(ops, [Op::Start, Op::Exec, Op::Read, Op::Write, Op::Denied, Op::Exec, Op::Message, Op::Result], "{ev:#?}");
        assert_eq!(ev[0].text.as_deref(), Some("gemini-cli 0.61.0"));
        assert_eq!((ev[1].command.as_deref(), ev[1].ok, ev[1].tool.as_deref()), (Some("ls -la"), Some(true), Some("run_shell_command")));
        assert_eq!(ev[2].paths, ["notes.md"]);
        assert_eq!((ev[3].paths.as_slice(), ev[3].ok), (&["out.txt".to_string()][..], Some(true)), "a write through the client's fs");
        assert_eq!((ev[4].paths.as_slice(), ev[4].tool.as_deref()), (&["~/.ssh/id_rsa.bak".to_string()][..], Some("write_file")));
        assert!(ev[4].text.as_deref().unwrap().contains("`cancel`"), "{:?}", ev[4].text);
        assert_eq!((ev[5].command.as_deref(), ev[5].exit), (Some("rm -f notes.md.orig"), Some(0)), "a Codex argv and exit code");
        assert_eq!(ev[6].text.as_deref(), Some("Done: listed, read and wrote."), "chunks in a row are one message");
        assert_eq!((ev[7].ok, ev[7].text.as_deref()), (Some(true), Some("Done: listed, read and wrote.")));
        assert!(ev.iter().all(|e| e.t_us >= 1_795_900_000_000_000));
    }

    #[test]
    fn a_failed_session_or_a_refusal_turn_end_is_a_failed_result() {
        let t = [
            json!({"t_us": 1, "from": "client", "msg": {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}}),
            json!({"t_us": 2, "from": "agent", "msg": {"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "Internal error"}}}),
        ];
        let text: String = t.iter().map(|v| format!("{v}\n")).collect();
        let ev = normalize(&text, &roots());
        assert_eq!(ev.iter().map(|e| e.op).collect::<Vec<_>>(), [Op::Start, Op::Result]);
        assert_eq!((ev[1].ok, ev[1].text.as_deref()), (Some(false), Some("initialize failed: Internal error")));
        let t = [
            json!({"t_us": 1, "from": "client", "msg": {"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {}}}),
            json!({"t_us": 2, "from": "agent", "msg": {"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "cancelled"}}}),
            json!({"t_us": 3, "from": "agent", "msg": {"jsonrpc": "2.0", "method": "session/update", "params": {"update": {"sessionUpdate": "brand_new"}}}}),
        ];
        let text: String = t.iter().map(|v| format!("{v}\n")).collect();
        let ev = normalize(&text, &roots());
        assert_eq!((ev[1].ok, ev[1].text.as_deref()), (Some(false), Some("the turn ended: cancelled")));
        assert_eq!((ev[2].op, ev[2].text.as_deref()), (Op::Unknown, Some("session update `brand_new`")));
    }
}
