//! Token budget arithmetic. Counting itself is an adapter concern (a real
//! tokenizer); this module only holds the rules that decide with the counts.

/// A cheap, deterministic estimate (one token per four bytes, rounded up) used
/// where no tokenizer is configured.
pub fn estimate_tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4)
}

/// Tokens the chat format adds around each message (role and separators), as
/// OpenAI documents for its chat models; a safe upper bound for the others.
pub const MESSAGE_OVERHEAD: u64 = 4;
/// Tokens that prime the assistant's reply.
pub const REPLY_PRIMING: u64 = 3;

/// Cost of a call in wallet units: tokens × rate, rounded up so a call is never free.
pub fn cost(input_tokens: u64, output_tokens: u64, input_rate: f64, output_rate: f64) -> i64 {
    let raw = input_tokens as f64 * input_rate + output_tokens as f64 * output_rate;
    raw.ceil().max(0.0) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimates_and_costs() {
        assert_eq!(estimate_tokens(""), 0);
        assert_eq!(estimate_tokens("abcd"), 1);
        assert_eq!(estimate_tokens("abcde"), 2);
        assert_eq!(cost(10, 10, 1.0, 2.0), 30);
        assert_eq!(cost(1, 0, 0.1, 0.0), 1);
    }
}
