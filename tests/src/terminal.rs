//! What a terminal shows of the CLI's progress bars: a small emulator for
//! the control sequences `indicatif` writes, and a parser for one bar's line.
//! (tests/cli_progress.rs keeps its own copy of both, from before this module.)

/// Just enough of a terminal for what `indicatif` writes: text that wraps at
/// `cols`, CR, LF, cursor up and down (`CSI n A`/`B`) and erase in line
/// (`CSI K`). Indicatif pads each line to the width and lets it wrap, so the
/// lines only exist once something lays them out.
pub struct Screen {
    cols: usize,
    rows: Vec<Vec<char>>,
    row: usize,
    col: usize,
    /// At the last column: the next character goes to the next line.
    wrap: bool,
    /// Every line that was erased, in order: the frames as they were drawn.
    pub erased: Vec<String>,
}

impl Screen {
    pub fn new(cols: usize) -> Self {
        Self {
            cols,
            rows: vec![Vec::new()],
            row: 0,
            col: 0,
            wrap: false,
            erased: Vec::new(),
        }
    }

    fn line(&self, row: usize) -> String {
        self.rows[row]
            .iter()
            .collect::<String>()
            .trim_end()
            .to_string()
    }

    fn down(&mut self, n: usize) {
        self.row += n;
        while self.rows.len() <= self.row {
            self.rows.push(Vec::new());
        }
    }

    fn put(&mut self, c: char) {
        if self.wrap {
            self.down(1);
            self.col = 0;
            self.wrap = false;
        }
        let line = &mut self.rows[self.row];
        if line.len() <= self.col {
            line.resize(self.col + 1, ' ');
        }
        line[self.col] = c;
        if self.col + 1 == self.cols {
            self.wrap = true;
        } else {
            self.col += 1;
        }
    }

    pub fn feed(&mut self, text: &str) {
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\u{1b}' if chars.peek() == Some(&'[') => {
                    chars.next();
                    let mut params = String::new();
                    let mut last = ' ';
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            last = c;
                            break;
                        }
                        params.push(c);
                    }
                    let n = params.parse::<usize>().unwrap_or(1).max(1);
                    match last {
                        'A' => self.row = self.row.saturating_sub(n),
                        'B' => self.down(n),
                        'K' => {
                            let text = self.line(self.row);
                            if !text.is_empty() {
                                self.erased.push(text);
                            }
                            let line = &mut self.rows[self.row];
                            match params.as_str() {
                                "2" => line.clear(),
                                _ => line.truncate(self.col),
                            }
                        }
                        _ => {}
                    }
                    self.wrap = false;
                }
                '\u{1b}' => {
                    chars.next();
                }
                '\r' => {
                    self.col = 0;
                    self.wrap = false;
                }
                '\n' => {
                    self.down(1);
                    self.wrap = false;
                }
                c => self.put(c),
            }
        }
    }

    /// What the screen shows now, line by line.
    pub fn shown(&self) -> Vec<String> {
        (0..self.rows.len())
            .map(|r| self.line(r))
            .filter(|l| !l.is_empty())
            .collect()
    }
}

/// What a stage's bar line says after its graphic:
/// `slug… [===>   ] text` → `text` (`7/9 jobs  running 40%  cost 1234`,
/// `waiting`, …).
pub fn bar_text<'a>(line: &'a str, stage: &str) -> Option<&'a str> {
    let rest = line.strip_prefix(stage)?;
    let rest = rest.trim_start().strip_prefix('[')?;
    let (graphic, rest) = rest.split_once(']')?;
    if graphic.len() != 30 || !graphic.chars().all(|c| matches!(c, '=' | '>' | ' ')) {
        return None;
    }
    Some(rest.trim())
}

/// A stage's bar line with counts: `slug… [===>   ] done/total jobs  …` →
/// (done, total, rest).
pub fn bar(line: &str, stage: &str) -> Option<(u64, u64, String)> {
    counts(bar_text(line, stage)?)
}

/// A bar's text with counts: `done/total jobs  rest` → (done, total, rest).
pub fn counts(text: &str) -> Option<(u64, u64, String)> {
    let (counts, rest) = text.split_once(" jobs")?;
    let (done, total) = counts.split_once('/')?;
    Some((
        done.parse().ok()?,
        total.parse().ok()?,
        rest.trim().to_string(),
    ))
}
