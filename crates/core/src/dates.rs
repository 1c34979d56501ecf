//! Calendar dates as people write them in contracts (issue 54, item 4):
//! "1 March 2021", "March 1, 2021", "1st March 2021", "Mar 1 2021",
//! "the 1st day of March, 2021", "2021-03-01", "01/03/2021", "1.3.2021".
//! A model asked for ISO dates may still copy the document's own form, so
//! anything that orders by a date parses it here instead of comparing text.
//!
//! Only the numeric forms with the year last are ambiguous ("01/03/2021" is
//! 1 March or 3 January); the caller says which reading its documents use.
//! Two-digit years are refused rather than guessed.

use std::fmt;
use thiserror::Error;

/// A day of the Gregorian calendar; orders by time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Date {
    // Field order is the derived ordering: year, then month, then day.
    year: u16,
    month: u8,
    day: u8,
}

impl Date {
    /// A date that exists: month 1–12, day within its month, year 1000–9999.
    pub fn new(year: u32, month: u32, day: u32) -> Result<Self, DateError> {
        if !(1000..=9999).contains(&year) {
            return Err(DateError::Year(year));
        }
        if !(1..=12).contains(&month) {
            return Err(DateError::Month(month));
        }
        if day == 0 || day > days_in_month(year, month) {
            return Err(DateError::NoSuchDay { year, month, day });
        }
        // In range for u16 and u8 by the checks above.
        Ok(Date {
            year: year as u16,
            month: month as u8,
            day: day as u8,
        })
    }

    pub fn year(&self) -> u32 {
        u32::from(self.year)
    }

    pub fn month(&self) -> u32 {
        u32::from(self.month)
    }

    pub fn day(&self) -> u32 {
        u32::from(self.day)
    }
}

/// ISO 8601: `YYYY-MM-DD`.
impl fmt::Display for Date {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }
}

/// How to read a numeric date whose year comes last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumericOrder {
    /// "01/03/2021" is 1 March 2021.
    DayFirst,
    /// "01/03/2021" is 3 January 2021.
    MonthFirst,
}

/// Why a text is not a date; the message is shown to users.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DateError {
    #[error("no date given")]
    Empty,
    #[error(
        "not a date form this engine reads (e.g. \"1 March 2021\", \"March 1, 2021\", \"2021-03-01\", \"01/03/2021\")"
    )]
    Unrecognised,
    #[error("the year must have four digits (1000-9999), not {0}")]
    Year(u32),
    #[error("there is no month {0}")]
    Month(u32),
    #[error("there is no day {day} in {year}-{month:02}")]
    NoSuchDay { year: u32, month: u32, day: u32 },
}

fn is_leap(year: u32) -> bool {
    (year.is_multiple_of(4) && !year.is_multiple_of(100)) || year.is_multiple_of(400)
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// The months' English names, January first.
pub const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

/// A month's number from its name or an abbreviation of at least three
/// letters ("Mar", "Sept", "Sep."), any case.
fn month_number(word: &str) -> Option<u32> {
    let word = word.strip_suffix('.').unwrap_or(word);
    if word.len() < 3 || !word.chars().all(|c| c.is_ascii_alphabetic()) {
        return None;
    }
    let word = word.to_ascii_lowercase();
    MONTHS
        .iter()
        .position(|m| m.starts_with(&word))
        .map(|i| i as u32 + 1)
}

/// A number of ASCII digits only (no sign, no spaces), with its digit count.
fn digits(text: &str) -> Option<(u32, usize)> {
    if text.is_empty() || text.len() > 9 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok().map(|n| (n, text.len()))
}

/// A day of the month as written: "1", "01", "1st", "22nd", "3rd", "4th".
fn day_number(word: &str) -> Option<u32> {
    let lower = word.to_ascii_lowercase();
    let number = ["st", "nd", "rd", "th"]
        .iter()
        .find_map(|s| lower.strip_suffix(s))
        .unwrap_or(&lower);
    digits(number).filter(|(_, len)| *len <= 2).map(|(n, _)| n)
}

fn year_number(word: &str) -> Result<u32, DateError> {
    match digits(word) {
        Some((year, 4)) => Ok(year),
        Some((year, _)) => Err(DateError::Year(year)),
        None => Err(DateError::Unrecognised),
    }
}

/// "2021-03-01", "01/03/2021", "1.3.2021": three numbers joined by one of
/// `-`, `/`, `.` (the same one twice). None when the text is not of this shape.
fn numeric(text: &str, order: NumericOrder) -> Option<Result<Date, DateError>> {
    let separator = text.chars().find(|c| matches!(c, '-' | '/' | '.'))?;
    let parts: Vec<&str> = text.split(separator).collect();
    let [a, b, c] = parts.as_slice() else {
        return None;
    };
    let (a, a_len) = digits(a)?;
    let (b, b_len) = digits(b)?;
    let (c, c_len) = digits(c)?;
    if b_len > 2 {
        return Some(Err(DateError::Unrecognised));
    }
    Some(match (a_len, c_len) {
        (4, 1..=2) => Date::new(a, b, c),
        (1..=2, 4) => match order {
            NumericOrder::DayFirst => Date::new(c, b, a),
            NumericOrder::MonthFirst => Date::new(c, a, b),
        },
        (1..=2, _) => Err(DateError::Year(c)),
        _ => Err(DateError::Unrecognised),
    })
}

/// Words that may surround a written date without changing it: "the 1st day
/// of March, 2021", "1 March 2021." — a final full stop is dropped before.
fn filler(word: &str) -> bool {
    matches!(word, "the" | "day" | "of" | "on")
}

/// "1 March 2021", "March 1, 2021", "1st March 2021", "Mar 1 2021", "the
/// 1st day of March, 2021": a day, a month's name and a four-digit year,
/// day and month in either order, the year last.
fn written(text: &str) -> Result<Date, DateError> {
    let lower = text.to_ascii_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|w| !w.is_empty() && !filler(w))
        .collect();
    let [first, second, year] = words.as_slice() else {
        return Err(DateError::Unrecognised);
    };
    let (day, month) = match (month_number(first), month_number(second)) {
        (None, Some(month)) => (day_number(first), month),
        (Some(month), None) => (day_number(second), month),
        _ => return Err(DateError::Unrecognised),
    };
    let day = day.ok_or(DateError::Unrecognised)?;
    Date::new(year_number(year)?, month, day)
}

/// Parses a date in one of the forms this module names; `order` reads the
/// numeric forms whose year is last.
pub fn parse(text: &str, order: NumericOrder) -> Result<Date, DateError> {
    let text = text.trim();
    // A sentence's full stop after a written date ("1 March 2021.").
    let text = match text.strip_suffix('.') {
        Some(rest) if rest.ends_with(|c: char| c.is_ascii_digit()) && !rest.contains('.') => rest,
        _ => text,
    };
    if text.is_empty() {
        return Err(DateError::Empty);
    }
    if let Some(date) = numeric(text, order) {
        return date;
    }
    written(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use NumericOrder::{DayFirst, MonthFirst};

    #[test]
    fn the_common_forms_parse_to_iso() {
        let table = [
            ("1 March 2021", DayFirst, "2021-03-01"),
            ("March 1, 2021", DayFirst, "2021-03-01"),
            ("March 1 2021", MonthFirst, "2021-03-01"),
            ("1st March 2021", DayFirst, "2021-03-01"),
            ("22nd February 2024", DayFirst, "2024-02-22"),
            ("Mar 1 2021", DayFirst, "2021-03-01"),
            ("Sept. 30, 2024", DayFirst, "2024-09-30"),
            ("1 MARCH 2021", DayFirst, "2021-03-01"),
            ("the 1st day of March, 2021", DayFirst, "2021-03-01"),
            ("  1 March 2021. ", DayFirst, "2021-03-01"),
            ("2021-03-01", DayFirst, "2021-03-01"),
            ("2021-03-01", MonthFirst, "2021-03-01"),
            ("2021/3/1", MonthFirst, "2021-03-01"),
            ("01/03/2021", DayFirst, "2021-03-01"),
            ("01/03/2021", MonthFirst, "2021-01-03"),
            ("1.3.2021", DayFirst, "2021-03-01"),
            ("1.3.2021", MonthFirst, "2021-01-03"),
            ("31-12-2020", DayFirst, "2020-12-31"),
            ("12/31/2020", MonthFirst, "2020-12-31"),
            ("29 February 2024", DayFirst, "2024-02-29"),
            ("29 February 2000", DayFirst, "2000-02-29"),
        ];
        for (text, order, iso) in table {
            assert_eq!(
                parse(text, order).map(|d| d.to_string()),
                Ok(iso.to_string()),
                "{text:?} {order:?}"
            );
        }
    }

    #[test]
    fn impossible_and_unreadable_dates_are_refused_with_a_reason() {
        let table = [
            (
                "31 February 2021",
                DateError::NoSuchDay {
                    year: 2021,
                    month: 2,
                    day: 31,
                },
            ),
            (
                "29 February 2023",
                DateError::NoSuchDay {
                    year: 2023,
                    month: 2,
                    day: 29,
                },
            ),
            (
                "29 February 1900",
                DateError::NoSuchDay {
                    year: 1900,
                    month: 2,
                    day: 29,
                },
            ),
            (
                "31/04/2021",
                DateError::NoSuchDay {
                    year: 2021,
                    month: 4,
                    day: 31,
                },
            ),
            ("2021-13-01", DateError::Month(13)),
            ("01/13/2021", DateError::Month(13)),
            (
                "0 March 2021",
                DateError::NoSuchDay {
                    year: 2021,
                    month: 3,
                    day: 0,
                },
            ),
            ("1/3/21", DateError::Year(21)),
            ("1 March 21", DateError::Year(21)),
            ("", DateError::Empty),
            ("   ", DateError::Empty),
            ("sometime next spring", DateError::Unrecognised),
            ("March 2021", DateError::Unrecognised),
            ("1 Smarch 2021", DateError::Unrecognised),
            ("1 March 2021 and 2 April 2021", DateError::Unrecognised),
            ("2021-03-01T00:00:00Z", DateError::Unrecognised),
            ("2021-03/01", DateError::Unrecognised),
            ("1 Ma 2021", DateError::Unrecognised),
            ("-1 March 2021", DateError::Unrecognised),
        ];
        for (text, error) in table {
            assert_eq!(parse(text, DayFirst), Err(error), "{text:?}");
        }
    }

    #[test]
    fn dates_order_by_time_not_by_text() {
        let mut dates: Vec<Date> = ["1 March 2021", "2020-06-01", "December 31, 2020"]
            .iter()
            .map(|t| parse(t, DayFirst).expect(t))
            .collect();
        dates.sort();
        let iso: Vec<String> = dates.iter().map(Date::to_string).collect();
        assert_eq!(iso, ["2020-06-01", "2020-12-31", "2021-03-01"]);
    }
}
