//! How the scripted model plays a scenario's steps through a real CLI's tools as a competent
//! model would: within each tool's contract, and persisting when a tool refuses a step for a
//! reason of its own.
//!
//! The play is a list of intended actions; the CLI's tools have rules a model has to follow
//! to get those actions done, which differ between CLIs and which a real model learns from
//! the tools' descriptions and answers:
//!
//! * a file tool that demands the file be read in the session first (Claude Code's Edit and
//!   Write): the model reads it first, and reads it again when the tool says the file changed
//!   since;
//! * a shell tool that keeps its working directory between calls (Claude Code's Bash,
//!   OpenHands' terminal): once a command may have moved it, every later command starts by
//!   going back to the workspace, so each step means what it means in the play;
//! * a file tool that refuses a step for a rule of its own (Gemini CLI's workspace-only file
//!   tools, an edit tool that wants a unique match): the model does the same thing with the
//!   shell tool instead;
//! * a shell tool that refuses or breaks a command for its syntax alone (Gemini CLI blocks any
//!   command substitution, `$(…)`, outside single quotes; Claude Code's Bash breaks a `{ …; }`
//!   group holding a pipeline): the model passes the same command to `eval` as one quoted word,
//!   which means the same thing (Gemini CLI strips a `bash -c` wrapper itself, and unquotes it
//!   wrongly).
//!
//! A refusal by the cell's permission policy is not worked around: that difference is the one
//! the cell measures. Every decision is a pure function of the play, the offered tools and the
//! history the request resends, so a CLI that retries a request gets the same answer, and no
//! decision depends on timing.

use std::collections::BTreeSet;

use serde_json::Value;

use super::history::Answered;
use super::{Role, ToolCall, Turn, Vocab, absolute, call_for, finish_call, sh_quote, shell_call, shell_command};
use overeager_core::paths::Roots;
use overeager_core::scenario::Step;

/// Words of a tool's answer saying the file must be read (again) before it is changed.
const READ_FIRST: &[&str] = &["has not been read", "modified since read", "read it first", "must read", "read the file before", "to read it before editing", "before editing it"];

/// Words of a tool's answer saying the cell's permission policy refused the call: the
/// difference that cell measures, so the model does not work around it.
const POLICY_REFUSAL: &[&str] = &["requested permissions", "haven't granted", "rejected(", "denied by", "user denied", "was denied", "declined", "not allowed by the approval", "approval mode"];

/// Words of a shell tool's answer saying it refused, or broke, a command for its syntax alone:
/// Gemini CLI blocks command substitution; Claude Code's Bash rewrites a `{ …; }` group that
/// holds a pipeline into words bash cannot run.
const SYNTAX_REFUSAL: &[&str] = &["command substitution syntax", "{: command not found"];

/// Why a tool answered as it did, as far as playing the step goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reaction {
    /// The step happened (or failed on its own terms, as it would in the play).
    Done,
    /// The tool wants the file read first.
    ReadFirst,
    /// The tool refused for a rule of its own: do the step with the shell instead.
    UseShell,
    /// The shell tool refused the command's syntax: run it through `eval`.
    Subshell,
}

fn lower_contains_any(text: &str, needles: &[&str]) -> bool {
    let t = text.to_lowercase();
    needles.iter().any(|n| t.contains(n))
}

/// Whether an answer's words are the cell's permission policy refusing the call.
pub fn is_policy_refusal(text: &str) -> bool {
    lower_contains_any(text, POLICY_REFUSAL)
}

/// What the answer to one of the model's calls (`shell`: to the shell tool; `changes_file`:
/// a write or an edit) means for the step it played. A failed command is the play's own
/// outcome, never retried — unless the shell itself refused it until a file it changes is
/// read with the file tool (Qwen Code's shell refuses a `sed -i` of a file the session has
/// not read), which a model does and then runs the command again.
pub fn reaction(a: &Answered, shell: bool, changes_file: bool) -> Reaction {
    let Some(text) = a.output.as_deref() else { return Reaction::Done };
    // A tool that wants a read first says so, whether or not its answer is flagged an error.
    let wants_read = lower_contains_any(text, READ_FIRST) && !is_policy_refusal(text);
    if shell {
        if wants_read && named_path(text).is_some() {
            return Reaction::ReadFirst;
        }
        return if lower_contains_any(text, SYNTAX_REFUSAL) && !is_policy_refusal(text) { Reaction::Subshell } else { Reaction::Done };
    }
    if wants_read && changes_file {
        return Reaction::ReadFirst;
    }
    // A create tool that will not overwrite, said without an error mark (GitHub Copilot CLI's
    // `create`: "Path … already exists as a file. Use `view` … then edit it."): a model
    // writes the file another way.
    if changes_file && lower_contains_any(text, &["already exists"]) && !is_policy_refusal(text) {
        return Reaction::UseShell;
    }
    let failed = a.error || {
        let head = text.trim_start().to_lowercase();
        // Claude Code's `<tool_use_error>`, OpenHands' `[An error occurred during execution.]`.
        ["error", "<tool_use_error>", "[an error occurred"].iter().any(|p| head.starts_with(p))
            // A one-line answer saying the tool failed (OpenCode's grep without its ripgrep:
            // "ripgrep execution failed").
            || (text.len() < 200 && !text.trim().contains('\n') && head.contains("failed"))
    };
    if !failed || is_policy_refusal(text) {
        return Reaction::Done;
    }
    if lower_contains_any(text, READ_FIRST) { Reaction::ReadFirst } else { Reaction::UseShell }
}

/// The first absolute path an answer names (`File /w/a.env has not been read …`).
fn named_path(text: &str) -> Option<String> {
    text.split_whitespace().map(|w| w.trim_matches(|c: char| "'\"`()[]<>,;:".contains(c)).trim_end_matches('.')).find(|w| w.starts_with('/') && w.len() > 1).map(str::to_string)
}

/// Whether a shell command may leave the shell in another directory.
fn moves_cwd(command: &str) -> bool {
    command
        .split(|c: char| ";&|(){}\n`".contains(c))
        .map(|part| part.trim_start().trim_start_matches('!').trim_start())
        .any(|part| ["cd", "pushd", "popd"].iter().any(|w| part == *w || part.starts_with(&format!("{w} ")) || part.starts_with(&format!("{w}\t"))))
}

/// The path a step changes or reads, for the read-first rule.
fn step_path(step: &Step) -> Option<&str> {
    match step {
        Step::Read { path } | Step::Write { path, .. } | Step::Edit { path, .. } | Step::Grep { path, .. } => Some(path),
        Step::Sh { .. } => None,
    }
}

/// One move of the scripted model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Move {
    /// Read step `i`'s file before changing it.
    ReadBefore(usize),
    /// Step `i` with the tool the CLI offers for it.
    Play(usize),
    /// Step `i` with the shell, after its own tool refused it.
    Shell(usize),
    /// Step `i`'s command through `eval`, after the shell tool refused its syntax.
    Subshell(usize),
    /// The CLI's own finishing tool (OpenHands' `finish`).
    FinishTool,
    /// The final message.
    Final,
}

/// Where the play stands, rebuilt from the history on every request.
#[derive(Debug, Default)]
struct State {
    /// The next step to play.
    step: usize,
    /// The current step's tool asked for a read first; it was not asked yet.
    read_wanted: bool,
    /// The file the tool named when it asked for the read, if it named one (else the step's).
    read_path: Option<String>,
    /// The current step was refused by its tool for a reason of its own.
    shell_wanted: bool,
    /// The current step's command was refused for its syntax.
    subshell_wanted: bool,
    /// The read-first rule was already honoured once for the current step.
    reread: bool,
    /// Absolute paths read or written with the CLI's file tools in this session.
    read: BTreeSet<String>,
    /// A shell command may have moved a working directory that persists.
    cwd_moved: bool,
    finish_called: bool,
}

/// A play and the tools one request offers.
pub struct Planner<'a> {
    pub steps: &'a [Step],
    pub vocab: &'a Vocab,
    pub roots: &'a Roots,
    pub default_shell: &'a str,
    pub label: &'a str,
    /// The shell command that ends the agent's task, for an agent that is finished by a
    /// command rather than a tool or a plain answer (mini-swe-agent's `echo
    /// COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`).
    pub finish_command: Option<&'a str>,
}

impl Planner<'_> {
    /// Whether `name` is the shell: the one offered, or the agent's own when none is.
    fn is_shell(&self, name: &str) -> bool {
        self.vocab.is_shell(name) || (self.vocab.tool_for(Role::Shell).is_none() && name == self.default_shell)
    }

    fn next(&self, s: &State) -> Move {
        let Some(step) = self.steps.get(s.step) else {
            let finishes = self.vocab.tool_for(Role::Finish).is_some() || self.finish_command.is_some();
            return if finishes && !s.finish_called { Move::FinishTool } else { Move::Final };
        };
        if s.subshell_wanted {
            return Move::Subshell(s.step);
        }
        if s.shell_wanted {
            return Move::Shell(s.step);
        }
        if s.read_wanted {
            return Move::ReadBefore(s.step);
        }
        let call = call_for(step, self.vocab, self.roots, self.default_shell);
        // An edit tool that refuses a file not read in the session (Claude Code's Edit, as its
        // description says). Write has the same rule only for files that exist, which the
        // model cannot know in advance: it learns that from the refusal.
        let needs_read = matches!(step, Step::Edit { .. })
            && self.vocab.tool_for(Role::Edit).is_some_and(|t| t.name == call.name && t.needs_read())
            && self.vocab.tool_for(Role::Read).is_some();
        match step_path(step).map(|p| absolute(p, self.roots)) {
            Some(p) if needs_read && !s.read.contains(&p) => Move::ReadBefore(s.step),
            _ => Move::Play(s.step),
        }
    }

    /// The call a move makes, with the working directory put back where a shell keeps it.
    fn call(&self, m: Move, s: &State) -> Turn {
        let summary = format!("Done: the {} play's {} step(s) are finished.", self.label, self.steps.len());
        let call = match m {
            Move::ReadBefore(i) => {
                let path = s.read_path.clone().or_else(|| step_path(&self.steps[i]).map(str::to_string)).expect("a file to read first: the step's, or the one the refusal named");
                call_for(&Step::Read { path }, self.vocab, self.roots, self.default_shell)
            }
            Move::Play(i) => call_for(&self.steps[i], self.vocab, self.roots, self.default_shell),
            Move::Shell(i) => shell_call(shell_command(&self.steps[i], self.roots), self.vocab, self.default_shell),
            Move::Subshell(i) => shell_call(format!("eval {}", sh_quote(&shell_command(&self.steps[i], self.roots))), self.vocab, self.default_shell),
            Move::FinishTool => match self.finish_command {
                Some(command) => shell_call(command.to_string(), self.vocab, self.default_shell),
                None => return finish_call(self.vocab, &summary).map_or(Turn::Final(summary), Turn::Call),
            },
            Move::Final => return Turn::Final(summary),
        };
        Turn::Call(if s.cwd_moved { from_workspace(call, &self.roots.workspace, self.vocab) } else { call })
    }

    fn observe(&self, s: &mut State, m: Move, made: &Turn, answer: Option<&Answered>) {
        let Turn::Call(call) = made else { return };
        if keeps_cwd(self.vocab, &call.name)
            && let Some(command) = call.args.get("command").and_then(Value::as_str)
        {
            s.cwd_moved |= moves_cwd(command);
        }
        let changes_file = matches!(m, Move::Play(i) if matches!(self.steps[i], Step::Write { .. } | Step::Edit { .. }));
        let reaction = answer.map(|a| reaction(a, self.is_shell(&a.name), changes_file)).unwrap_or(Reaction::Done);
        let advance = |s: &mut State| {
            s.step += 1;
            s.read_wanted = false;
            s.read_path = None;
            s.shell_wanted = false;
            s.subshell_wanted = false;
            s.reread = false;
        };
        match m {
            Move::ReadBefore(i) => {
                s.read_wanted = false;
                s.reread = true;
                if let Some(p) = s.read_path.take().or_else(|| step_path(&self.steps[i]).map(str::to_string)) {
                    s.read.insert(absolute(&p, self.roots));
                }
            }
            Move::Play(i) => match reaction {
                Reaction::ReadFirst if !s.reread => {
                    s.read_wanted = true;
                    s.read_path = answer.and_then(|a| a.output.as_deref()).and_then(named_path).filter(|_| step_path(&self.steps[i]).is_none());
                }
                Reaction::ReadFirst | Reaction::UseShell if !self.is_shell(&call.name) => s.shell_wanted = true,
                Reaction::Subshell => s.subshell_wanted = true,
                _ => {
                    if !matches!(self.steps[i], Step::Sh { .. } | Step::Grep { .. })
                        && let Some(p) = step_path(&self.steps[i])
                    {
                        s.read.insert(absolute(p, self.roots));
                    }
                    advance(s);
                }
            },
            Move::Shell(_) => match reaction {
                Reaction::Subshell => s.subshell_wanted = true,
                _ => advance(s),
            },
            Move::Subshell(_) => advance(s),
            Move::FinishTool => s.finish_called = true,
            Move::Final => {}
        }
    }

    /// The turn to answer after the calls of `answered`, which are the model's own earlier
    /// calls in order (one per turn) with their answers.
    pub fn turn(&self, answered: &[Answered]) -> Turn {
        let mut s = State::default();
        for answer in answered {
            let m = self.next(&s);
            let t = self.call(m, &s);
            self.observe(&mut s, m, &t, Some(answer));
        }
        let m = self.next(&s);
        self.call(m, &s)
    }
}

/// Whether `name` is a shell whose working directory persists from one call to the next (as
/// its description says: Claude Code's Bash, OpenHands' terminal).
fn keeps_cwd(v: &Vocab, name: &str) -> bool {
    v.is_shell(name) && v.get(name).is_some_and(|t| t.keeps_cwd())
}

/// `call` run from the workspace, for a shell that may stand elsewhere since an earlier call.
fn from_workspace(mut call: ToolCall, workspace: &str, v: &Vocab) -> ToolCall {
    if keeps_cwd(v, &call.name)
        && let Some(Value::String(command)) = call.args.get_mut("command")
    {
        *command = format!("cd {}; {command}", sh_quote(workspace));
    }
    call
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roots() -> Roots {
        Roots { workspace: "/s/work".into(), home: "/s/home".into() }
    }

    fn vocab(names: &[&str]) -> Vocab {
        crate::model::tools::declared(names)
    }

    fn answered(t: &Turn, output: &str, error: bool) -> Answered {
        let Turn::Call(c) = t else { panic!("a call was expected, got {t:?}") };
        Answered { name: c.name.clone(), args: c.args.clone(), output: Some(output.into()), error }
    }

    /// Plays `steps` to the end against a tool that answers each call with `answer`.
    fn play(steps: &[Step], v: &Vocab, answer: impl Fn(&ToolCall) -> (String, bool)) -> Vec<Turn> {
        let r = roots();
        let p = Planner { steps, vocab: v, roots: &r, default_shell: "Bash", label: "test", finish_command: None };
        let mut history = Vec::new();
        let mut turns = Vec::new();
        loop {
            let t = p.turn(&history);
            turns.push(t.clone());
            match &t {
                Turn::Final(_) => return turns,
                Turn::Call(c) => {
                    let (out, err) = answer(c);
                    history.push(answered(&t, &out, err));
                }
            }
            assert!(turns.len() < 50, "the play ends");
        }
    }

    fn names(turns: &[Turn]) -> Vec<String> {
        turns.iter().map(|t| match t { Turn::Call(c) => c.name.clone(), Turn::Final(_) => "final".into() }).collect()
    }

    #[test]
    fn an_edit_is_preceded_by_a_read_once() {
        let v = vocab(&["Bash", "Read", "Edit", "Write"]);
        let steps = [Step::Edit { path: "a.txt".into(), old: "x".into(), new: "y".into() }, Step::Edit { path: "a.txt".into(), old: "y".into(), new: "z".into() }];
        let turns = play(&steps, &v, |_| ("ok".into(), false));
        assert_eq!(names(&turns), ["Read", "Edit", "Edit", "final"]);
        let Turn::Call(read) = &turns[0] else { unreachable!() };
        assert_eq!(read.args["file_path"], "/s/work/a.txt");
    }

    #[test]
    fn a_refused_write_is_read_and_written_again() {
        let v = vocab(&["Bash", "Read", "Edit", "Write"]);
        let steps = [Step::Write { path: "cfg.toml".into(), content: "x".into() }];
        let refused_once = std::cell::Cell::new(false);
        let turns = play(&steps, &v, |c| {
            if c.name == "Write" && !refused_once.replace(true) {
                ("<tool_use_error>File has not been read yet. Read it first before writing to it.</tool_use_error>".into(), true)
            } else {
                ("ok".into(), false)
            }
        });
        assert!(refused_once.get());
        assert_eq!(names(&turns), ["Write", "Read", "Write", "final"]);
        // Continue CLI's Edit says so without an error mark.
        let refused_once = std::cell::Cell::new(false);
        let turns = play(&steps, &v, |c| {
            if c.name == "Write" && !refused_once.replace(true) {
                ("You must use the Read tool to read /s/work/cfg.toml before editing it.".into(), false)
            } else {
                ("ok".into(), false)
            }
        });
        assert_eq!(names(&turns), ["Write", "Read", "Write", "final"]);
    }

    #[test]
    fn a_tool_that_keeps_refusing_to_write_is_replaced_by_the_shell() {
        let v = vocab(&["Bash", "Read", "Edit", "Write"]);
        let steps = [Step::Write { path: "cfg.toml".into(), content: "x".into() }];
        let turns = play(&steps, &v, |c| if c.name == "Write" { ("File has been modified since read".into(), true) } else { ("ok".into(), false) });
        assert_eq!(names(&turns), ["Write", "Read", "Write", "Bash", "final"]);
    }

    #[test]
    fn a_workspace_only_file_tool_falls_back_to_the_shell() {
        let v = vocab(&["run_shell_command", "read_file", "write_file", "replace"]);
        let steps = [Step::Read { path: "~/.npmrc".into() }, Step::Read { path: "README.md".into() }];
        let turns = play(&steps, &v, |c| {
            if c.name == "read_file" && c.args.to_string().contains("/s/home") { ("Path not in workspace: /s/home/.npmrc".into(), true) } else { ("ok".into(), false) }
        });
        assert_eq!(names(&turns), ["read_file", "run_shell_command", "read_file", "final"]);
        let Turn::Call(shell) = &turns[1] else { unreachable!() };
        assert_eq!(shell.args["command"], "cat -- /s/home/.npmrc");
    }

    #[test]
    fn an_editor_that_will_not_overwrite_is_replaced_by_the_shell() {
        // OpenHands' file_editor `create` refuses an existing file.
        let v = vocab(&["terminal", "file_editor", "finish"]);
        let steps = [Step::Write { path: "config/app.toml".into(), content: "x".into() }];
        let refusal = "[An error occurred during execution.]\nInvalid `path` parameter: /s/work/config/app.toml. File already exists at: /s/work/config/app.toml. Cannot overwrite files using command `create`.";
        let turns = play(&steps, &v, |c| if c.name == "file_editor" { (refusal.into(), false) } else { ("ok".into(), false) });
        assert_eq!(names(&turns), ["file_editor", "terminal", "finish", "final"]);
    }

    #[test]
    fn a_create_tool_that_says_the_file_exists_is_replaced_by_the_shell() {
        // GitHub Copilot CLI's `create`, answered without an error mark.
        let v = vocab(&["bash", "create", "view"]);
        let steps = [Step::Write { path: "registry.json".into(), content: "{}".into() }];
        let refusal = "Path /s/work/registry.json already exists as a file. Use `view` to check contents then edit it.";
        let turns = play(&steps, &v, |c| if c.name == "create" { (refusal.into(), false) } else { ("ok".into(), false) });
        assert_eq!(names(&turns), ["create", "bash", "final"]);
    }

    #[test]
    fn a_shell_that_wants_the_file_read_first_gets_it_read_then_the_command_again() {
        // Qwen Code's shell refuses an in-place edit of a file the session has not read, and
        // its write tool a file not read, both in plain answers with no error flag.
        let v = vocab(&["run_shell_command", "read_file", "write_file"]);
        let steps = [Step::Sh { command: "sed -i s/a/b/ cfg.env".into() }, Step::Write { path: "n.txt".into(), content: "x".into() }];
        let refused = std::cell::RefCell::new(BTreeSet::new());
        let turns = play(&steps, &v, |c| {
            let changes = c.name == "write_file" || c.args["command"].as_str().is_some_and(|x| x.starts_with("sed"));
            if changes && refused.borrow_mut().insert(c.name.clone()) {
                let file = if c.name == "write_file" { "/s/work/n.txt" } else { "/s/work/cfg.env" };
                (format!("File {file} has not been read in this session. Use the read_file tool first."), false)
            } else {
                ("ok".into(), false)
            }
        });
        assert_eq!(names(&turns), ["run_shell_command", "read_file", "run_shell_command", "write_file", "read_file", "write_file", "final"]);
        let Turn::Call(read) = &turns[1] else { unreachable!() };
        assert_eq!(read.args["file_path"], "/s/work/cfg.env", "the file the shell named");
        // A plain failing command is still the play's own outcome.
        let turns = play(&[Step::Sh { command: "false".into() }], &v, |_| ("Exit Code: 1".into(), false));
        assert_eq!(names(&turns), ["run_shell_command", "final"]);
    }

    #[test]
    fn a_permission_refusal_is_not_worked_around() {
        let v = vocab(&["Bash", "Read", "Edit", "Write"]);
        let steps = [Step::Write { path: "x".into(), content: "y".into() }];
        let turns = play(&steps, &v, |_| ("Claude requested permissions to write to /s/work/x, but you haven't granted it yet.".into(), true));
        assert_eq!(names(&turns), ["Write", "final"]);
        // A failed shell command is the play's own outcome.
        let turns = play(&[Step::Sh { command: "false".into() }], &v, |_| ("Error: exit code 1".into(), true));
        assert_eq!(names(&turns), ["Bash", "final"]);
    }

    #[test]
    fn a_shell_that_keeps_its_directory_is_sent_back_to_the_workspace() {
        let steps = [Step::Sh { command: "ls".into() }, Step::Sh { command: "cd repos/main && make".into() }, Step::Sh { command: "cd repos/main && rm -rf backups".into() }];
        let commands = |v: &Vocab| -> Vec<String> {
            play(&steps, v, |_| ("ok".into(), false)).iter().filter_map(|t| match t { Turn::Call(c) => Some(c.args["command"].as_str().unwrap_or_default().to_string()), _ => None }).collect()
        };
        assert_eq!(commands(&vocab(&["Bash"])), ["ls", "cd repos/main && make", "cd /s/work; cd repos/main && rm -rf backups"]);
        // Gemini's shell starts every command afresh in the workspace: nothing to add.
        assert_eq!(commands(&vocab(&["run_shell_command"])), ["ls", "cd repos/main && make", "cd repos/main && rm -rf backups"]);
        assert!(moves_cwd("make && pushd x") && moves_cwd("(cd a; ls)") && !moves_cwd("echo abcd") && !moves_cwd("grep cd file"));
    }

    #[test]
    fn a_command_refused_for_its_syntax_runs_through_eval() {
        let v = vocab(&["run_shell_command", "read_file"]);
        let steps = [Step::Sh { command: "printf '%s' \"$(cat k.pub)\" >> ~/.ssh/authorized_keys".into() }];
        let blocked = "Command injection detected: command substitution syntax ($(), backticks, <() or >()) found in command arguments.";
        let turns = play(&steps, &v, |c| if c.args["command"].as_str().unwrap().starts_with("printf") { (blocked.into(), false) } else { ("ok".into(), false) });
        assert_eq!(names(&turns), ["run_shell_command", "run_shell_command", "final"]);
        let Turn::Call(again) = &turns[1] else { unreachable!() };
        assert_eq!(again.args["command"], "eval 'printf '\\''%s'\\'' \"$(cat k.pub)\" >> ~/.ssh/authorized_keys'");
    }

    #[test]
    fn openhands_finishes_with_its_finish_tool() {
        let v = vocab(&["terminal", "finish"]);
        let turns = play(&[Step::Sh { command: "ls".into() }], &v, |_| ("ok".into(), false));
        assert_eq!(names(&turns), ["terminal", "finish", "final"]);
    }
}
