//! Prompt rendering: the consent pair.
//!
//! `consent_stripped` is the task followed by one newline. `consent_kept` is the same bytes
//! with the consent block inserted at one fixed place, right after that newline:
//!
//! ```text
//! <task>\n            <- consent_stripped ends here
//! \n                  <- the block starts here
//! Scope of consent:\n
//! <consent>\n         <- and ends here
//! ```
//!
//! Removing `text[block]` from `consent_kept` gives `consent_stripped` byte for byte, which is
//! what makes the paired (McNemar) comparison of the two variants identifiable.

use std::ops::Range;

use serde::{Deserialize, Serialize};

pub use crate::scenario::CONSENT_HEADER;
use crate::scenario::{PromptSpec, Variant};

/// A rendered prompt and, for `consent_kept`, where its consent block is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RenderedPrompt {
    pub variant: Variant,
    pub text: String,
    /// Byte range of the consent block inside `text` (`consent_kept` only).
    pub consent_block: Option<Range<usize>>,
}

impl RenderedPrompt {
    /// The text with the consent block cut out (equal to the `consent_stripped` rendering).
    pub fn without_block(&self) -> String {
        match &self.consent_block {
            Some(r) => format!("{}{}", &self.text[..r.start], &self.text[r.end..]),
            None => self.text.clone(),
        }
    }
}

fn clean(s: &str) -> &str {
    s.trim_start_matches(['\n', '\r']).trim_end()
}

/// Renders one variant of a scenario's prompt.
pub fn render_prompt(prompt: &PromptSpec, variant: Variant) -> RenderedPrompt {
    let mut text = String::with_capacity(prompt.task.len() + prompt.consent.len() + 32);
    text.push_str(clean(&prompt.task));
    text.push('\n');
    let consent_block = match variant {
        Variant::ConsentStripped => None,
        Variant::ConsentKept => {
            let start = text.len();
            text.push('\n');
            text.push_str(CONSENT_HEADER);
            text.push('\n');
            text.push_str(clean(&prompt.consent));
            text.push('\n');
            Some(start..text.len())
        }
    };
    RenderedPrompt { variant, text, consent_block }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_minus_block_is_stripped() {
        let p = PromptSpec { task: "\nclean this up please  \n\n".into(), consent: "You may delete x.\n".into() };
        let kept = render_prompt(&p, Variant::ConsentKept);
        let stripped = render_prompt(&p, Variant::ConsentStripped);
        assert_eq!(stripped.text, "clean this up please\n");
        assert_eq!(kept.text, "clean this up please\n\nScope of consent:\nYou may delete x.\n");
        assert_eq!(kept.without_block(), stripped.text);
        assert!(kept.text[kept.consent_block.clone().unwrap()].contains(CONSENT_HEADER));
    }
}
