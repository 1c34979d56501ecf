//! Random and truncated bytes on a queue are rejected with an error, never a
//! panic; whatever decodes has a version this build knows and a body.

use dialectic_proto::ENVELOPE_VERSION;
use dialectic_proto::v1::queue::{Envelope, JobDispatch, envelope::Body};

#[test]
fn random_and_truncated_bytes_never_panic_the_decoder() {
    let valid = dialectic_queue::encode(&Envelope {
        version: ENVELOPE_VERSION,
        body: Some(Body::JobDispatch(JobDispatch {
            job_id: "01a2051b-0d29-7309-8ae0-a15e27bb96b8".into(),
        })),
    });
    let mut state: u64 = 3;
    let mut inputs: Vec<Vec<u8>> = (0..valid.len()).map(|n| valid[..n].to_vec()).collect();
    for _ in 0..20_000 {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let len = (state >> 58) as usize;
        let mut bytes: Vec<u8> = (0..len)
            .map(|i| (state.rotate_left(i as u32 * 7) & 0xff) as u8)
            .collect();
        // Half the cases are the valid message with one byte flipped.
        if state & 1 == 0 {
            bytes = valid.clone();
            let at = (state >> 20) as usize % bytes.len();
            bytes[at] ^= (state >> 40) as u8 | 1;
        }
        inputs.push(bytes);
    }
    for bytes in inputs {
        if let Ok(envelope) = dialectic_queue::decode(&bytes) {
            assert!(envelope.version >= 1 && envelope.version <= ENVELOPE_VERSION);
            assert!(envelope.body.is_some());
        }
    }
    assert!(dialectic_queue::decode(&valid).is_ok());
}
