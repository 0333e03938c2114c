//! What h2probe says on stderr (errors, warnings, notices): `h2probe: ` and
//! the text, folded at 80 columns under the text when stderr is a terminal
//! a person reads, one line a message otherwise (a log, for grep).

use std::io::IsTerminal;

/// The width a person's terminal is read at.
const WIDTH: usize = 80;

const PREFIX: &str = "h2probe: ";

/// Says `msg` on stderr (see the module's doc).
pub fn say(msg: &str) {
    eprintln!("{}", said(msg, std::io::stderr().is_terminal()));
}

/// The text [`say`] writes: `h2probe: msg`, folded at [`WIDTH`] when `fold`
/// (continuation lines under the text; each of `msg`'s own lines too).
pub fn said(msg: &str, fold: bool) -> String {
    let indent = " ".repeat(PREFIX.len());
    let mut out = String::from(PREFIX);
    for (i, line) in msg.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
            out.push_str(&indent);
        }
        if fold {
            out.push_str(&folded(line, PREFIX.len()));
        } else {
            out.push_str(line);
        }
    }
    out
}

/// `line` within [`WIDTH`] terminal columns after an `indent` (a prefix as
/// wide on its first line, or none, as the caller has it), continued on
/// lines indented as much; as it is when it fits. A CJK character a server
/// sent takes two columns.
pub fn folded(line: &str, indent: usize) -> String {
    let width = WIDTH - indent;
    if h2probe_analysis::compare::columns(line) <= width {
        return line.to_string();
    }
    let pad = format!("\n{}", " ".repeat(indent));
    h2probe_analysis::compare::wrap_words(line, width).join(&pad)
}

/// [`say`] with `format!`'s arguments.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::say::say(&format!($($arg)*))
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_message_folds_under_its_text_at_a_terminal_only() {
        let msg = "stalled: nothing reached the application for 2s with messages pending; ending the run (see the stall event)";
        assert_eq!(said(msg, false), format!("h2probe: {msg}"));
        let folded = said(msg, true);
        assert_eq!(
            folded,
            "h2probe: stalled: nothing reached the application for 2s with messages pending;\n         ending the run (see the stall event)"
        );
        for l in folded.lines() {
            assert!(l.chars().count() <= 80, "{l:?}");
        }
        // Short messages and a message's own lines stay as they are.
        assert_eq!(said("interrupted", true), "h2probe: interrupted");
        assert_eq!(said("a\nb", true), "h2probe: a\n         b");
    }
}
