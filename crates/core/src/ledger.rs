//! The kinds of token ledger entries, named once: the store binds their
//! names into SQL and reads them back through this enum, so a misspelt kind
//! is a compile error instead of a query that quietly matches nothing.

use crate::job::UnknownValue;
use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LedgerKind {
    /// Tokens added to the wallet (an administrator's top-up).
    Credit,
    /// Tokens reserved for a call before it is made.
    Hold,
    /// A hold turned into a debit of what the call actually cost.
    Capture,
    /// A hold given back in full.
    Release,
    /// A charge without an open hold (a call that replied after its hold was released).
    Debit,
    /// Tokens given back after a debit. The ledger's CHECK admits it, so a
    /// row of this kind must read back even though no request writes one yet.
    Refund,
}

impl LedgerKind {
    pub const ALL: [LedgerKind; 6] = [
        LedgerKind::Credit,
        LedgerKind::Hold,
        LedgerKind::Capture,
        LedgerKind::Release,
        LedgerKind::Debit,
        LedgerKind::Refund,
    ];

    /// The name the `token_wallet_transactions.kind` column stores.
    pub const fn as_str(self) -> &'static str {
        match self {
            LedgerKind::Credit => "credit",
            LedgerKind::Hold => "hold",
            LedgerKind::Capture => "capture",
            LedgerKind::Release => "release",
            LedgerKind::Debit => "debit",
            LedgerKind::Refund => "refund",
        }
    }

    pub fn parse(value: &str) -> Result<Self, UnknownValue> {
        value.parse()
    }

    /// Whether an entry of this kind closes the hold it names: a hold is
    /// closed once, by its capture or its release (the ledger's unique index
    /// `token_wallet_transactions_one_close` holds the same list).
    pub const fn closes_hold(self) -> bool {
        matches!(self, LedgerKind::Capture | LedgerKind::Release)
    }
}

impl fmt::Display for LedgerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for LedgerKind {
    type Err = UnknownValue;
    fn from_str(value: &str) -> Result<Self, UnknownValue> {
        LedgerKind::ALL
            .into_iter()
            .find(|kind| kind.as_str() == value)
            .ok_or_else(|| UnknownValue::new("ledger kind", value))
    }
}

/// For reading the column as text (`#[sqlx(try_from = "String")]`).
impl TryFrom<String> for LedgerKind {
    type Error = UnknownValue;
    fn try_from(value: String) -> Result<Self, UnknownValue> {
        value.parse()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_is_read_back_from_its_own_stored_name() {
        // Parsing searches ALL for the name: a name two kinds shared would
        // read back as the first of them. Which names the table admits is
        // store's contract test, read from the migrated schema.
        for kind in LedgerKind::ALL {
            assert_eq!(LedgerKind::parse(kind.as_str()), Ok(kind));
        }
        let err = LedgerKind::parse("Capture").unwrap_err();
        assert_eq!((err.kind, err.value.as_str()), ("ledger kind", "Capture"));
        assert!(LedgerKind::try_from(String::from("withdrawal")).is_err());
    }

    #[test]
    fn only_captures_and_releases_close_a_hold() {
        let closing: Vec<LedgerKind> = LedgerKind::ALL
            .into_iter()
            .filter(|k| k.closes_hold())
            .collect();
        assert_eq!(closing, [LedgerKind::Capture, LedgerKind::Release]);
    }
}
