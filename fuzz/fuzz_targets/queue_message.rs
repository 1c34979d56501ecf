//! Queue bodies may be anything a broker delivers: decoding must refuse
//! garbage with an error (so the message is dead-lettered with a reason),
//! never panic, and what it accepts must survive a round trip.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(envelope) = dialectic_queue::decode(data) {
        let again = dialectic_queue::decode(&dialectic_queue::encode(&envelope))
            .expect("an accepted envelope re-encodes");
        assert_eq!(again, envelope);
    }
});
