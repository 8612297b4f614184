//! The tool calls of an agent's native event stream with what normalized events leave out:
//! the call's id, its full arguments and the output the agent saw. Exports to other tools'
//! trace formats (ATIF, Inspect) pair these with the agent-channel events by raw line.
//!
//! Each call is keyed by the raw line of `agent.jsonl` that the adapter made its event(s)
//! from, and its position among the calls of that line.

pub use crate::adapters::calls::{Calls, ToolIo};
use crate::adapters::Format;

/// Reads the tool calls of a transcript of `format` (each format's adapter finds them). Lines
/// it does not understand are passed over: the normalized events remain the record of what
/// happened.
pub fn tool_calls(format: Format, transcript: &str) -> Calls {
    format.tool_calls(transcript)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_calls_carry_their_input_and_output() {
        let t = concat!(
            r#"{"type":"assistant","message":{"content":[{"type":"text","text":"ok"},{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}},{"type":"tool_use","id":"t2","name":"Read","input":{"file_path":"a"}}]}}"#,
            "\n",
            r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t2","content":[{"type":"text","text":"A"}],"is_error":true},{"type":"tool_result","tool_use_id":"t1","content":"x\ny"}]}}"#,
            "\n"
        );
        let calls = tool_calls(Format::CLAUDE_CODE, t);
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[&(0, 0)].name, "Bash");
        assert_eq!(calls[&(0, 0)].output.as_deref(), Some("x\ny"));
        assert!(!calls[&(0, 0)].error);
        assert_eq!(calls[&(0, 1)].arguments, serde_json::json!({"file_path": "a"}));
        assert!(calls[&(0, 1)].error);
    }

    #[test]
    fn codex_commands_open_on_start_and_close_on_completion() {
        let t = concat!(
            r#"{"type":"item.started","item":{"id":"i0","type":"command_execution","command":"bash -lc ls","status":"in_progress"}}"#,
            "\n",
            r#"{"type":"item.completed","item":{"id":"i0","type":"command_execution","command":"bash -lc ls","aggregated_output":"a\n","exit_code":2,"status":"failed"}}"#,
            "\n"
        );
        let calls = tool_calls(Format::named("codex").unwrap(), t);
        assert_eq!(calls.len(), 1);
        let c = &calls[&(0, 0)];
        assert_eq!((c.id.as_str(), c.output.as_deref(), c.error), ("i0", Some("a\n"), true));
    }

    #[test]
    fn gemini_and_openhands_results_find_their_calls() {
        let g = "{\"type\":\"tool_use\",\"tool_name\":\"read_file\",\"tool_id\":\"r1\",\"parameters\":{\"file_path\":\"x\"}}\n{\"type\":\"tool_result\",\"tool_id\":\"r1\",\"status\":\"success\",\"output\":\"X\"}\n";
        assert_eq!(tool_calls(Format::named("gemini-cli").unwrap(), g)[&(0, 0)].output.as_deref(), Some("X"));
        let o = "not json\n{\"id\":3,\"action\":\"run\",\"args\":{\"command\":\"ls\"}}\n{\"id\":4,\"cause\":3,\"observation\":\"run\",\"content\":\"a\",\"extras\":{\"metadata\":{\"exit_code\":1}}}\n";
        let calls = tool_calls(Format::named("openhands").unwrap(), o);
        let c = &calls[&(1, 0)];
        assert_eq!((c.id.as_str(), c.output.as_deref(), c.error), ("3", Some("a"), true));
    }
}
