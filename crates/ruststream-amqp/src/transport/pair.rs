//! The management link pair's one name on the wire.
//!
//! RabbitMQ pairs its two management links by name, and fe2o3-amqp refuses two links
//! of one name on a session: a management connection's stream ([`Patched`](super::Patched))
//! renames the receiving link's attach frames, both ways.

use bytes::BytesMut;

use super::{be_u32, descriptor, skip_value};

const ATTACH: u64 = 0x12;

/// The management link pair of a connection (see [`crate::management`]).
///
/// RabbitMQ pairs the two management links by name, and fe2o3-amqp refuses two links
/// of one name on a session. The links get names that differ in their last byte only
/// (`…s` sending, `…r` receiving); the receiving link's attach goes out under the
/// sending link's name, and the broker's answering attach (role sender, that name) comes
/// back under the receiving link's name. Same length: one byte changes.
#[derive(Debug)]
pub(crate) struct Pair {
    /// The sending link's name (the name on the wire).
    pub(crate) sending: Vec<u8>,
    /// The receiving link's name.
    pub(crate) receiving: Vec<u8>,
    /// Written bytes not yet checked (an incomplete frame) or not yet written through.
    pub(crate) out: BytesMut,
    /// Bytes at the front of `out` that are checked.
    pub(crate) out_ready: usize,
}

impl Pair {
    /// A pair from the sending link's name; the receiving link's name ends in `r`.
    pub(crate) fn new(sending: &str) -> Self {
        let sending = sending.as_bytes().to_vec();
        let mut receiving = sending.clone();
        if let Some(last) = receiving.last_mut() {
            *last = if *last == b'r' { b's' } else { b'r' };
        }
        Self {
            sending,
            receiving,
            out: BytesMut::new(),
            out_ready: 0,
        }
    }

    /// The receiving link's name.
    pub(crate) fn receiving(&self) -> String {
        String::from_utf8_lossy(&self.receiving).into_owned()
    }

    /// Marks every complete outgoing frame ready, renaming the receiving link's attach.
    pub(crate) fn scan_out(&mut self) {
        loop {
            let rest = &self.out[self.out_ready..];
            if rest.len() < 8 {
                return;
            }
            if rest.starts_with(b"AMQP") {
                self.out_ready += 8;
                continue;
            }
            let size = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
            if size < 8 {
                self.out_ready = self.out.len(); // not framing as expected: pass through
                return;
            }
            if rest.len() < size {
                return;
            }
            let start = self.out_ready;
            rename_attach(
                &mut self.out[start..start + size],
                &self.receiving,
                &self.sending,
                true,
            );
            self.out_ready += size;
        }
    }
}

/// In an attach frame named `from` whose role is `receiver`, renames the link `to`
/// (same length). Anything else is left as it is.
pub(crate) fn rename_attach(frame: &mut [u8], from: &[u8], to: &[u8], receiver: bool) {
    let _ = try_rename_attach(frame, from, to, receiver);
}

fn try_rename_attach(frame: &mut [u8], from: &[u8], to: &[u8], receiver: bool) -> Option<()> {
    let doff = usize::from(*frame.get(4)?) * 4;
    if *frame.get(5)? != 0 || doff < 8 || from.len() != to.len() {
        return None;
    }
    let mut pos = doff;
    if descriptor(frame, &mut pos)? != ATTACH {
        return None;
    }
    // The field list, then name (string), handle (uint), role (boolean).
    pos = match *frame.get(pos)? {
        0xc0 => pos + 3,
        0xd0 => pos + 9,
        _ => return None,
    };
    let (name_at, len) = match *frame.get(pos)? {
        0xa1 => (pos + 2, usize::from(*frame.get(pos + 1)?)),
        0xb1 => (pos + 5, be_u32(frame, pos + 1)?),
        _ => return None,
    };
    if frame.get(name_at..name_at + len)? != from {
        return None;
    }
    let handle = name_at + len;
    let role_at = skip_value(frame, handle)?;
    let role = match *frame.get(role_at)? {
        0x41 => true,
        0x42 => false,
        0x56 => *frame.get(role_at + 1)? != 0,
        _ => return None,
    };
    if role == receiver {
        frame.get_mut(name_at..name_at + len)?.copy_from_slice(to);
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attach(name: &[u8], role: u8) -> Vec<u8> {
        let mut fields = vec![0xa1, u8::try_from(name.len()).unwrap()];
        fields.extend_from_slice(name);
        fields.extend_from_slice(&[0x52, 0x01, role]); // handle 1, role
        let mut body = vec![0x00, 0x53, 0x12, 0xc0, 0, 3];
        body[4] = u8::try_from(fields.len() + 1).unwrap();
        body.extend_from_slice(&fields);
        let mut frame = u32::try_from(body.len() + 8)
            .unwrap()
            .to_be_bytes()
            .to_vec();
        frame.extend_from_slice(&[0x02, 0x00, 0x00, 0x00]);
        frame.extend_from_slice(&body);
        frame
    }

    #[test]
    fn the_pair_shares_one_name_on_the_wire() {
        let pair = Pair::new("c-mgmt-s-1s");
        assert_eq!(pair.receiving(), "c-mgmt-s-1r");
        // Our receiving link's attach (role receiver) goes out under the sending name.
        let mut out = attach(b"c-mgmt-s-1r", 0x41);
        rename_attach(&mut out, &pair.receiving, &pair.sending, true);
        assert_eq!(out, attach(b"c-mgmt-s-1s", 0x41));
        // The broker's answer for it (role sender) comes back under the receiving name.
        let mut back = attach(b"c-mgmt-s-1s", 0x42);
        rename_attach(&mut back, &pair.sending, &pair.receiving, false);
        assert_eq!(back, attach(b"c-mgmt-s-1r", 0x42));
        // The sending link's attach and its answer keep their name; others are left.
        for (frame, from, to, role) in [
            (
                attach(b"c-mgmt-s-1s", 0x42),
                &pair.sending,
                &pair.receiving,
                true,
            ),
            (
                attach(b"c-mgmt-s-1s", 0x41),
                &pair.sending,
                &pair.receiving,
                false,
            ),
            (
                attach(b"other-name-", 0x41),
                &pair.receiving,
                &pair.sending,
                true,
            ),
        ] {
            let mut f = frame.clone();
            rename_attach(&mut f, from, to, role);
            assert_eq!(f, frame);
        }
    }
}
