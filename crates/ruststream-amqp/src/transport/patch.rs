//! The frame patch: in the first transfer frame of a delivery, an annotation whose value
//! is an array of maps becomes an array of binaries (one constructor byte changed; see
//! the parent module).

const TRANSFER: u64 = 0x14;
const DELIVERY_ANNOTATIONS: u64 = 0x71;
const MESSAGE_ANNOTATIONS: u64 = 0x72;

/// Patches the frames of one connection, in order, in place.
///
/// Only the first transfer frame of a delivery holds section boundaries: a transfer
/// that follows one with `more` set on the same channel continues the message's bytes,
/// which may look like anything, and is left as it is.
#[derive(Debug, Default)]
pub(crate) struct FramePatcher {
    /// Channels whose last transfer had `more` set (usually none, so no allocation).
    continuing: Vec<u16>,
}

impl FramePatcher {
    /// Patches one whole AMQP frame, saying what it is if it is a transfer. Anything
    /// unexpected leaves it as it is.
    pub(crate) fn patch(&mut self, frame: &mut [u8]) -> Option<Part> {
        let transfer = read_transfer(frame)?;
        let at = self.continuing.iter().position(|c| *c == transfer.channel);
        match (at, transfer.more) {
            (None, true) => self.continuing.push(transfer.channel),
            (Some(i), false) => {
                self.continuing.swap_remove(i);
            }
            _ => {}
        }
        if at.is_none() {
            let _ = patch_sections(frame, transfer.sections);
        }
        Some(Part {
            channel: transfer.channel,
            first: at.is_none(),
            more: transfer.more,
            sections: transfer.sections,
        })
    }
}

/// A transfer frame's place in its message.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Part {
    pub(crate) channel: u16,
    /// The message starts in this frame.
    pub(crate) first: bool,
    /// The message goes on in the next transfer on the channel.
    pub(crate) more: bool,
    /// Where the message bytes start in the frame.
    pub(crate) sections: usize,
}

/// What a transfer frame says about itself.
struct Transfer {
    channel: u16,
    /// `more` set and `aborted` not: the next transfer on the channel continues this one.
    more: bool,
    /// Where the message bytes start.
    sections: usize,
}

/// The transfer performative of `frame`; `None` for any other frame or a malformed one.
fn read_transfer(frame: &[u8]) -> Option<Transfer> {
    let doff = usize::from(*frame.get(4)?) * 4;
    if *frame.get(5)? != 0 || doff < 8 {
        return None; // not an AMQP frame (SASL), or malformed
    }
    let channel = u16::from_be_bytes([*frame.get(6)?, *frame.get(7)?]);
    let mut pos = doff;
    if descriptor(frame, &mut pos)? != TRANSFER {
        return None;
    }
    let sections = skip_value(frame, pos)?; // the transfer performative's fields
    let (count, mut field) = match *frame.get(pos)? {
        0x45 => (0, pos + 1),
        0xc0 => (usize::from(*frame.get(pos + 2)?), pos + 3),
        0xd0 => (be_u32(frame, pos + 5)?, pos + 9),
        _ => return None,
    };
    let (mut more, mut aborted) = (false, false);
    // Fields: handle, delivery-id, delivery-tag, message-format, settled, more (5),
    // rcv-settle-mode, state, resume, aborted (9), batchable.
    for i in 0..count.min(10) {
        match i {
            5 => more = read_bool(frame, field)?,
            9 => aborted = read_bool(frame, field)?,
            _ => {}
        }
        field = skip_value(frame, field)?;
        if field > sections {
            return None;
        }
    }
    Some(Transfer {
        channel,
        more: more && !aborted,
        sections,
    })
}

/// A boolean field (null is false).
fn read_bool(frame: &[u8], pos: usize) -> Option<bool> {
    match *frame.get(pos)? {
        0x40 | 0x42 => Some(false),
        0x41 => Some(true),
        0x56 => Some(*frame.get(pos + 1)? != 0),
        _ => None,
    }
}

/// Patches the annotation sections of a message starting at `pos`.
fn patch_sections(frame: &mut [u8], mut pos: usize) -> Option<()> {
    // Message sections, in order: header, delivery-annotations, message-annotations, ...
    while pos < frame.len() {
        let code = descriptor(frame, &mut pos)?;
        match code {
            0x70 => pos = skip_value(frame, pos)?,
            DELIVERY_ANNOTATIONS | MESSAGE_ANNOTATIONS => {
                patch_annotations(frame, pos)?;
                pos = skip_value(frame, pos)?;
            }
            _ => return Some(()), // the bare message: nothing to patch
        }
    }
    Some(())
}

/// Reads a section or performative descriptor (`0x00` then a ulong) at `pos`.
pub(crate) fn descriptor(frame: &[u8], pos: &mut usize) -> Option<u64> {
    if *frame.get(*pos)? != 0x00 {
        return None;
    }
    let code = match *frame.get(*pos + 1)? {
        0x53 => {
            let v = u64::from(*frame.get(*pos + 2)?);
            *pos += 3;
            v
        }
        0x80 => {
            let b = frame.get(*pos + 2..*pos + 10)?;
            *pos += 10;
            u64::from_be_bytes(b.try_into().ok()?)
        }
        0x44 => {
            *pos += 2;
            0
        }
        _ => return None,
    };
    Some(code)
}

/// Patches the top-level values of the annotation map at `pos`.
fn patch_annotations(frame: &mut [u8], pos: usize) -> Option<()> {
    let (count, mut p, end) = match *frame.get(pos)? {
        0xc1 => {
            let size = usize::from(*frame.get(pos + 1)?);
            (usize::from(*frame.get(pos + 2)?), pos + 3, pos + 2 + size)
        }
        0xd1 => {
            let size = be_u32(frame, pos + 1)?;
            (be_u32(frame, pos + 5)?, pos + 9, pos + 5 + size)
        }
        _ => return None,
    };
    if end > frame.len() {
        return None;
    }
    for i in 0..count {
        let next = skip_value(frame, p)?;
        if next > end {
            return None;
        }
        if i % 2 == 1 {
            patch_array_of_maps(frame, p, next);
        }
        p = next;
    }
    Some(())
}

/// An array of maps at `pos` (ending before `end`) becomes an array of binaries (same
/// bytes).
fn patch_array_of_maps(frame: &mut [u8], pos: usize, end: usize) {
    let ctor = match frame.get(pos) {
        Some(0xe0) => pos + 3,
        Some(0xf0) => pos + 9,
        _ => return,
    };
    if ctor >= end {
        return;
    }
    if let Some(c) = frame.get_mut(ctor) {
        match *c {
            0xc1 => *c = 0xa0,
            0xd1 => *c = 0xb0,
            _ => {}
        }
    }
}

pub(crate) fn be_u32(frame: &[u8], pos: usize) -> Option<usize> {
    let b = frame.get(pos..pos + 4)?;
    Some(u32::from_be_bytes(b.try_into().ok()?) as usize)
}

/// The position just after the encoded value at `pos`.
pub(crate) fn skip_value(frame: &[u8], pos: usize) -> Option<usize> {
    let code = *frame.get(pos)?;
    let next = match code {
        0x00 => {
            // described: descriptor value, then the value
            let after_descriptor = skip_value(frame, pos + 1)?;
            return skip_value(frame, after_descriptor);
        }
        0x40..=0x45 => pos + 1,
        0x50..=0x56 => pos + 2,
        0x60 | 0x61 => pos + 3,
        0x70..=0x74 => pos + 5,
        0x80..=0x84 => pos + 9,
        0x94 | 0x98 => pos + 17,
        0xa0 | 0xa1 | 0xa3 | 0xc0 | 0xc1 | 0xe0 => pos + 2 + usize::from(*frame.get(pos + 1)?),
        0xb0 | 0xb1 | 0xb3 | 0xd0 | 0xd1 | 0xf0 => pos + 5 + be_u32(frame, pos + 1)?,
        _ => return None,
    };
    (next <= frame.len()).then_some(next)
}
