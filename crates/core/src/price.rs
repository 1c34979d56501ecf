//! What a model call costs in money (issue 56). The wallet counts tokens;
//! a model's registry row may also price them in a currency, per million
//! tokens. Money is exact: integer nanos of the currency (10^-9 of a unit,
//! as `google.type.Money`), never a float once parsed.
//!
//! Rounding: a call's cost is computed exactly (tokens × nanos per million
//! tokens, in 128 bits), then divided by one million once, rounding half up
//! to a whole nano. Each call is rounded once, never each of its parts, and
//! a session's cost is the plain sum of its calls' rounded costs, so it can
//! be recomputed exactly from the recorded calls.

use std::fmt;

/// Nanos in one unit of a currency.
pub const NANOS_PER_UNIT: i64 = 1_000_000_000;
/// Prices are per this many tokens.
pub const TOKENS_PER_PRICE: u128 = 1_000_000;

/// The currency a price states when it names none.
pub const DEFAULT_CURRENCY: &str = "USD";

/// An amount of money: `nanos` of `currency` (never negative here: prices
/// and costs are).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Money {
    /// ISO 4217 code, e.g. "USD".
    pub currency: String,
    pub nanos: i64,
}

impl Money {
    /// Whole units and the nanos beyond them, as `google.type.Money` splits it.
    pub fn units_and_nanos(&self) -> (i64, i32) {
        let units = self.nanos / NANOS_PER_UNIT;
        // |remainder| < 10^9 fits an i32.
        let rest = (self.nanos % NANOS_PER_UNIT) as i32;
        (units, rest)
    }
}

impl fmt::Display for Money {
    /// `0.012345 USD`: every significant decimal, none lost.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", decimal(self.nanos), self.currency)
    }
}

/// `nanos` as a decimal number of units, trailing zeros dropped ("1.25", "0").
pub fn decimal(nanos: i64) -> String {
    let sign = if nanos < 0 { "-" } else { "" };
    let abs = nanos.unsigned_abs();
    let units = abs / NANOS_PER_UNIT as u64;
    let rest = abs % NANOS_PER_UNIT as u64;
    if rest == 0 {
        return format!("{sign}{units}");
    }
    let fraction = format!("{rest:09}");
    format!("{sign}{units}.{}", fraction.trim_end_matches('0'))
}

/// A model's prices, per million tokens, in nanos of `currency`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prices {
    pub currency: String,
    pub input_per_mtok: i64,
    pub output_per_mtok: i64,
    /// Prompt-cache reads; None bills cached tokens at the input price.
    pub cached_input_per_mtok: Option<i64>,
    /// Prompt-cache writes (Anthropic's `cache_creation_input_tokens`, 1.25×
    /// the input price for its 5-minute cache); None bills them at the input
    /// price.
    pub cache_write_per_mtok: Option<i64>,
}

/// The token counts a provider reported for one call. Cached input tokens
/// and cache-write tokens are parts of the input tokens (OpenAI's
/// `prompt_tokens_details.cached_tokens`; Anthropic's counts added up).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallTokens {
    pub input: u64,
    pub output: u64,
    pub cached_input: u64,
    pub cache_write: u64,
}

/// What one call cost at `prices`: cached input tokens at the cached price,
/// cache writes at the cache-write price (each at the input price when the
/// model has none), the rest of the input at the input price, output at the
/// output price; rounded once, half up, to a nano. Saturates at `i64::MAX`
/// nanos (9.2 billion units) rather than wrapping.
pub fn call_cost(prices: &Prices, tokens: CallTokens) -> Money {
    let cached = tokens.cached_input.min(tokens.input);
    let written = tokens.cache_write.min(tokens.input - cached);
    let rate = |r: i64| u128::try_from(r).unwrap_or(0);
    let input_rate = rate(prices.input_per_mtok);
    let or_input = |r: Option<i64>| r.map_or(input_rate, rate);
    let exact = u128::from(tokens.input - cached - written) * input_rate
        + u128::from(cached) * or_input(prices.cached_input_per_mtok)
        + u128::from(written) * or_input(prices.cache_write_per_mtok)
        + u128::from(tokens.output) * rate(prices.output_per_mtok);
    let rounded = (exact + TOKENS_PER_PRICE / 2) / TOKENS_PER_PRICE;
    Money {
        currency: prices.currency.clone(),
        nanos: i64::try_from(rounded).unwrap_or(i64::MAX),
    }
}

/// Why a price or currency was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PriceError {
    #[error("{0} is not a price of 0 or more")]
    Negative(String),
    #[error("{0:?} is not a decimal number (e.g. 1.25)")]
    NotADecimal(String),
    #[error("{0} has more than 9 decimal places (prices are exact to a billionth)")]
    TooPrecise(String),
    #[error("{0} is too large a price")]
    TooLarge(String),
    #[error("currency {0:?} is not an ISO 4217 code (three capital letters, e.g. USD)")]
    Currency(String),
}

/// A decimal price as written ("1.25", "0.125", "10") in nanos, exactly:
/// parsed from its text, so no float rounding enters.
pub fn parse_decimal(text: &str) -> Result<i64, PriceError> {
    let text = text.trim();
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |s: &str| s.chars().all(|c| c.is_ascii_digit());
    if text.starts_with('-') {
        return Err(PriceError::Negative(text.to_string()));
    }
    if (whole.is_empty() && fraction.is_empty()) || !digits(whole) || !digits(fraction) {
        return Err(PriceError::NotADecimal(text.to_string()));
    }
    let fraction = fraction.trim_end_matches('0');
    if fraction.len() > 9 {
        return Err(PriceError::TooPrecise(text.to_string()));
    }
    let too_large = || PriceError::TooLarge(text.to_string());
    let units: i64 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| too_large())?
    };
    let rest: i64 = format!("{fraction:0<9}").parse().map_err(|_| too_large())?;
    units
        .checked_mul(NANOS_PER_UNIT)
        .and_then(|n| n.checked_add(rest))
        .ok_or_else(too_large)
}

/// A currency code as stored: three ASCII capital letters.
pub fn check_currency(code: &str) -> Result<(), PriceError> {
    if code.len() == 3 && code.chars().all(|c| c.is_ascii_uppercase()) {
        Ok(())
    } else {
        Err(PriceError::Currency(code.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prices(cached: Option<i64>) -> Prices {
        Prices {
            currency: "USD".into(),
            input_per_mtok: 1_250_000_000,   // $1.25
            output_per_mtok: 10_000_000_000, // $10
            cached_input_per_mtok: cached,
            cache_write_per_mtok: None,
        }
    }

    fn tokens(input: u64, output: u64, cached_input: u64) -> CallTokens {
        CallTokens {
            input,
            output,
            cached_input,
            cache_write: 0,
        }
    }

    #[test]
    fn cache_writes_take_the_write_price_reads_the_cached_price_the_rest_the_input_price() {
        let prices = Prices {
            cache_write_per_mtok: Some(1_562_500_000), // $1.5625, 1.25 × input
            ..prices(Some(125_000_000))
        };
        let call = CallTokens {
            cache_write: 4_000,
            ..tokens(6_000, 500, 1_000)
        };
        // 1,000 plain × 1,250 + 1,000 read × 125 + 4,000 written × 1,562.5
        // + 500 out × 10,000 nanos.
        let expected = 1_250_000 + 125_000 + 6_250_000 + 5_000_000;
        assert_eq!(call_cost(&prices, call).nanos, expected);
        // Without a write price, writes are input; more writes than the
        // input left after reads count only what is left.
        let unpriced_writes = Prices {
            cache_write_per_mtok: None,
            ..prices.clone()
        };
        assert_eq!(
            call_cost(&unpriced_writes, call).nanos,
            5_000 * 1_250 + 125_000 + 5_000_000
        );
        let excess = CallTokens {
            cache_write: 9_000,
            ..call
        };
        assert_eq!(
            call_cost(&prices, excess).nanos,
            125_000 + 7_812_500 + 5_000_000
        );
    }

    #[test]
    fn cached_tokens_take_the_cached_price_and_the_rest_the_input_price() {
        // 1,000 uncached × 1,250 nanos + 1,000 cached × 125 + 500 × 10,000.
        let cost = call_cost(&prices(Some(125_000_000)), tokens(2_000, 500, 1_000));
        assert_eq!(cost.nanos, 1_250_000 + 125_000 + 5_000_000);
        assert_eq!(cost.currency, "USD");
    }

    #[test]
    fn without_a_cached_price_or_cached_tokens_all_input_is_at_the_input_price() {
        let all_input = 2_000 * 1_250 + 500 * 10_000;
        assert_eq!(
            call_cost(&prices(None), tokens(2_000, 500, 1_000)).nanos,
            all_input
        );
        assert_eq!(
            call_cost(&prices(Some(125_000_000)), tokens(2_000, 500, 0)).nanos,
            all_input
        );
    }

    #[test]
    fn more_cached_than_input_tokens_counts_only_the_input() {
        let cost = call_cost(&prices(Some(0)), tokens(10, 0, 50));
        assert_eq!(cost.nanos, 0);
    }

    #[test]
    fn a_call_is_rounded_once_half_up_to_a_nano() {
        // One token at 1,500,000 nanos per million tokens is 1.5 nanos → 2;
        // at 1,499,999 it is 1.499999 → 1.
        let p = |input| Prices {
            currency: "EUR".into(),
            input_per_mtok: input,
            output_per_mtok: 0,
            cached_input_per_mtok: None,
            cache_write_per_mtok: None,
        };
        assert_eq!(call_cost(&p(1_500_000), tokens(1, 0, 0)).nanos, 2);
        assert_eq!(call_cost(&p(1_499_999), tokens(1, 0, 0)).nanos, 1);
        // Parts are not rounded apart: 0.4 + 0.4 nanos is 1, not 0.
        let parts = Prices {
            output_per_mtok: 400_000,
            ..p(400_000)
        };
        assert_eq!(call_cost(&parts, tokens(1, 1, 0)).nanos, 1);
    }

    #[test]
    fn a_huge_call_saturates_instead_of_wrapping() {
        let p = Prices {
            currency: "USD".into(),
            input_per_mtok: i64::MAX,
            output_per_mtok: i64::MAX,
            cached_input_per_mtok: None,
            cache_write_per_mtok: None,
        };
        assert_eq!(call_cost(&p, tokens(u64::MAX, u64::MAX, 0)).nanos, i64::MAX);
    }

    #[test]
    fn decimal_prices_parse_exactly() {
        assert_eq!(parse_decimal("1.25"), Ok(1_250_000_000));
        assert_eq!(parse_decimal("0.125"), Ok(125_000_000));
        assert_eq!(parse_decimal("10"), Ok(10_000_000_000));
        assert_eq!(parse_decimal(".5"), Ok(500_000_000));
        assert_eq!(parse_decimal("0.000000001"), Ok(1));
        assert_eq!(parse_decimal("2.500000000000"), Ok(2_500_000_000));
        assert!(matches!(
            parse_decimal("0.0000000001"),
            Err(PriceError::TooPrecise(_))
        ));
        assert!(matches!(parse_decimal("-1"), Err(PriceError::Negative(_))));
        assert!(matches!(
            parse_decimal("1e3"),
            Err(PriceError::NotADecimal(_))
        ));
        assert!(matches!(parse_decimal(""), Err(PriceError::NotADecimal(_))));
        assert!(matches!(
            parse_decimal("99999999999"),
            Err(PriceError::TooLarge(_))
        ));
    }

    #[test]
    fn money_shows_every_decimal_and_splits_as_google_money() {
        let m = Money {
            currency: "USD".into(),
            nanos: 12_345_678_901,
        };
        assert_eq!(m.to_string(), "12.345678901 USD");
        assert_eq!(m.units_and_nanos(), (12, 345_678_901));
        assert_eq!(decimal(1_250_000_000), "1.25");
        assert_eq!(decimal(0), "0");
        assert_eq!(decimal(1), "0.000000001");
    }

    #[test]
    fn currencies_are_three_capital_letters() {
        assert_eq!(check_currency("USD"), Ok(()));
        assert!(check_currency("usd").is_err());
        assert!(check_currency("US").is_err());
        assert!(check_currency("€").is_err());
    }
}
