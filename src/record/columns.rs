//! A chunk's events as postcard stores them: column by column.
//!
//! ```text
//! events  = count (u32) | times | kinds | threads | devices | names | aux | args | flags
//! column  = postcard bytes (length, then the bytes): `count` values, each in postcard's
//!           own encoding of its type, one after the other
//! times   = i64: each event's time minus the one before (the first's minus 0)
//! kinds   = RecordKind (its variant index: a byte)
//! threads, names, aux = u32;  devices = u16;  flags = u8
//! args    = i64: each event's `arg` minus the one before (the first's minus 0)
//! ```
//! Every column is exactly what postcard writes for its values (varints, i64 zig-zagged;
//! the tests check it value by value), so the format is postcard's. The writer produces a
//! column with a loop over the chunk's events that pushes the varint bytes into one buffer,
//! rather than handing postcard each field of each event through serde: a few instructions
//! a value instead of a serializer call, a small `memcpy` and a capacity check each. The
//! reader takes each value back with postcard's own deserializer.
//!
//! Time and `arg` are deltas because the collector drains events thread by thread in time
//! order: consecutive stamps are close, and consecutive args are mostly the same op id (an
//! op's queued, start and end events) or the engine's next ones. Wrapping arithmetic makes
//! any `u64` round-trip.
//!
//! A column that holds fewer values than `count`, more bytes than its values, or a value
//! postcard refuses (an overlong varint, a kind past the last) fails the chunk's decoding,
//! so a corrupt chunk is an error, never a wrong event. `count` is checked against the
//! flags column (a byte an event) before anything is allocated for it.
#![forbid(unsafe_code)]

use serde::de::Error as _;
use serde::ser::SerializeTuple;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::format::{RecordKind, RecordedEvent};

/// The columns after `count`.
const COLUMNS: usize = 8;

/// Bytes a varint of a `u64` takes at most.
const MAX_VARINT: usize = 10;

/// Serializes `events` column by column (module docs).
pub(crate) fn serialize<S: Serializer>(
    events: &[RecordedEvent],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    let count = u32::try_from(events.len()).map_err(serde::ser::Error::custom)?;
    let mut column = Vec::with_capacity(events.len() * MAX_VARINT);
    let mut tuple = serializer.serialize_tuple(1 + COLUMNS)?;
    tuple.serialize_element(&count)?;
    for fill in [
        times as fn(&[RecordedEvent], &mut Vec<u8>),
        kinds,
        threads,
        devices,
        names,
        aux,
        args,
        flags,
    ] {
        column.clear();
        fill(events, &mut column);
        tuple.serialize_element(&Bytes(&column))?;
    }
    tuple.end()
}

/// Deserializes the events [`serialize`] wrote, with their absolute times. The column
/// bytes are borrowed from the input (postcard's `from_bytes`, which every frame goes
/// through, lends them).
pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<RecordedEvent>, D::Error> {
    let (count, columns) = <(u32, [&'de [u8]; COLUMNS])>::deserialize(deserializer)?;
    decode(count, columns).map_err(D::Error::custom)
}

/// A byte slice that serde writes as bytes (postcard: its length, then the bytes).
struct Bytes<'a>(&'a [u8]);

impl Serialize for Bytes<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(self.0)
    }
}

/// Pushes `value` as postcard's varint: seven bits a byte, low first, the high bit set on
/// every byte but the last.
#[inline(always)]
fn varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// `value` zig-zagged as postcard stores an `i64`: small magnitudes of either sign small.
#[inline(always)]
fn zigzag(value: i64) -> u64 {
    ((value << 1) ^ (value >> 63)) as u64
}

/// Pushes the deltas of `field` over `events` (the first from 0), zig-zagged.
#[inline(always)]
fn deltas(events: &[RecordedEvent], out: &mut Vec<u8>, field: impl Fn(&RecordedEvent) -> u64) {
    let mut previous = 0u64;
    for event in events {
        let value = field(event);
        varint(out, zigzag(value.wrapping_sub(previous) as i64));
        previous = value;
    }
}

fn times(events: &[RecordedEvent], out: &mut Vec<u8>) {
    deltas(events, out, |event| event.ts_ns);
}

fn args(events: &[RecordedEvent], out: &mut Vec<u8>) {
    deltas(events, out, |event| event.arg);
}

fn kinds(events: &[RecordedEvent], out: &mut Vec<u8>) {
    // Under 128 variants: the variant index's varint is the index itself.
    out.extend(events.iter().map(|event| event.kind as u8));
}

fn threads(events: &[RecordedEvent], out: &mut Vec<u8>) {
    for event in events {
        varint(out, u64::from(event.thread));
    }
}

fn devices(events: &[RecordedEvent], out: &mut Vec<u8>) {
    for event in events {
        varint(out, u64::from(event.device));
    }
}

fn names(events: &[RecordedEvent], out: &mut Vec<u8>) {
    for event in events {
        varint(out, u64::from(event.name));
    }
}

fn aux(events: &[RecordedEvent], out: &mut Vec<u8>) {
    for event in events {
        varint(out, u64::from(event.aux));
    }
}

fn flags(events: &[RecordedEvent], out: &mut Vec<u8>) {
    out.extend(events.iter().map(|event| event.flags));
}

/// Why a chunk's columns do not decode.
#[derive(Debug, thiserror::Error)]
enum ColumnError {
    #[error("its flags column holds {flags} bytes for {count} events")]
    Count { count: u32, flags: usize },
    #[error("its {0} column does not decode: {1}")]
    Value(&'static str, postcard::Error),
    #[error("its {0} column has bytes after its last value")]
    Trailing(&'static str),
}

/// The columns' names, in order, for errors.
const COLUMN_NAMES: [&str; COLUMNS] = [
    "times", "kinds", "threads", "devices", "names", "aux", "args", "flags",
];

type Column<'de> = postcard::Deserializer<'de, postcard::de_flavors::Slice<'de>>;

/// The next value of column `at`.
#[inline(always)]
fn next<'de, T: Deserialize<'de>>(
    columns: &mut [Column<'de>; COLUMNS],
    at: usize,
) -> Result<T, ColumnError> {
    T::deserialize(&mut columns[at]).map_err(|error| ColumnError::Value(COLUMN_NAMES[at], error))
}

fn decode(count: u32, columns: [&[u8]; COLUMNS]) -> Result<Vec<RecordedEvent>, ColumnError> {
    let flags = columns[COLUMNS - 1].len();
    if flags != count as usize {
        return Err(ColumnError::Count { count, flags });
    }
    let mut columns = columns.map(postcard::Deserializer::from_bytes);
    let mut events = Vec::with_capacity(count as usize);
    let (mut ts_ns, mut arg) = (0u64, 0u64);
    for _ in 0..count {
        ts_ns = ts_ns.wrapping_add(next::<i64>(&mut columns, 0)? as u64);
        let kind: RecordKind = next(&mut columns, 1)?;
        let thread = next(&mut columns, 2)?;
        let device = next(&mut columns, 3)?;
        let name = next(&mut columns, 4)?;
        let aux = next(&mut columns, 5)?;
        arg = arg.wrapping_add(next::<i64>(&mut columns, 6)? as u64);
        let flags = next(&mut columns, 7)?;
        events.push(RecordedEvent {
            ts_ns,
            kind,
            thread,
            device,
            name,
            aux,
            arg,
            flags,
        });
    }
    for (column, name) in columns.into_iter().zip(COLUMN_NAMES) {
        let rest = column
            .finalize()
            .map_err(|error| ColumnError::Value(name, error))?;
        if !rest.is_empty() {
            return Err(ColumnError::Trailing(name));
        }
    }
    Ok(events)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A chunk's events field, as a frame holds it.
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Events(#[serde(with = "super")] Vec<RecordedEvent>);

    const KINDS: [RecordKind; 17] = [
        RecordKind::OpQueued,
        RecordKind::OpStart,
        RecordKind::OpEnd,
        RecordKind::TaskStart,
        RecordKind::TaskEnd,
        RecordKind::Steal,
        RecordKind::SpinStart,
        RecordKind::SpinEnd,
        RecordKind::Park,
        RecordKind::Unpark,
        RecordKind::PoolResized,
        RecordKind::QueueDepth,
        RecordKind::StreamSubmit,
        RecordKind::StreamStart,
        RecordKind::StreamEnd,
        RecordKind::SpanEnter,
        RecordKind::SpanExit,
    ];

    /// Events with every kind and values of every size, extremes included.
    fn events(count: usize, seed: u64) -> Vec<RecordedEvent> {
        let mut rng = fastrand::Rng::with_seed(seed);
        let any = |rng: &mut fastrand::Rng| match rng.u8(0..4) {
            0 => rng.u64(0..128),
            1 => rng.u64(..1 << 21),
            2 => rng.u64(..),
            _ => [0, u64::MAX, 1 << 63, (1 << 63) - 1][rng.usize(0..4)],
        };
        (0..count)
            .map(|at| RecordedEvent {
                ts_ns: any(&mut rng),
                kind: KINDS[at % KINDS.len()],
                thread: any(&mut rng) as u32,
                device: any(&mut rng) as u16,
                name: any(&mut rng) as u32,
                aux: any(&mut rng) as u32,
                arg: any(&mut rng),
                flags: any(&mut rng) as u8,
            })
            .collect()
    }

    #[test]
    fn events_round_trip_exactly() {
        for count in [0, 1, 2, 17, 1000] {
            let events = events(count, count as u64);
            let bytes = postcard::to_stdvec(&Events(events.clone())).unwrap();
            let back: Events = postcard::from_bytes(&bytes).unwrap();
            assert_eq!(back.0, events, "{count} events");
        }
    }

    /// Every column is postcard's encoding of its values: decoding it value by value with
    /// postcard gives them back, and encoding them with postcard gives its bytes.
    #[test]
    fn every_column_is_postcard_of_its_values() {
        let events = events(500, 25);
        let expected: [Vec<u8>; COLUMNS] = {
            let (mut ts, mut arg) = (0u64, 0u64);
            let mut columns: [Vec<u8>; COLUMNS] = Default::default();
            for event in &events {
                let put = |column: &mut Vec<u8>, bytes: Vec<u8>| column.extend(bytes);
                let dt = event.ts_ns.wrapping_sub(ts) as i64;
                let da = event.arg.wrapping_sub(arg) as i64;
                (ts, arg) = (event.ts_ns, event.arg);
                put(&mut columns[0], postcard::to_stdvec(&dt).unwrap());
                put(&mut columns[1], postcard::to_stdvec(&event.kind).unwrap());
                put(&mut columns[2], postcard::to_stdvec(&event.thread).unwrap());
                put(&mut columns[3], postcard::to_stdvec(&event.device).unwrap());
                put(&mut columns[4], postcard::to_stdvec(&event.name).unwrap());
                put(&mut columns[5], postcard::to_stdvec(&event.aux).unwrap());
                put(&mut columns[6], postcard::to_stdvec(&da).unwrap());
                put(&mut columns[7], postcard::to_stdvec(&event.flags).unwrap());
            }
            columns
        };
        let bytes = postcard::to_stdvec(&Events(events.clone())).unwrap();
        let (count, written): (u32, [&[u8]; COLUMNS]) = postcard::from_bytes(&bytes).unwrap();
        assert_eq!(count, 500);
        for (at, name) in COLUMN_NAMES.iter().enumerate() {
            assert_eq!(written[at], &expected[at][..], "the {name} column");
        }
    }

    fn decodes(count: u32, columns: [&[u8]; COLUMNS]) -> Result<Events, postcard::Error> {
        let bytes = postcard::to_stdvec(&(count, columns.map(|column| Bytes(column)))).unwrap();
        postcard::from_bytes(&bytes)
    }

    #[test]
    fn columns_that_do_not_fit_their_count_are_refused() {
        let one: [&[u8]; COLUMNS] = [&[2], &[1], &[3], &[0], &[7], &[0], &[2], &[0]];
        let event = decodes(1, one).unwrap().0;
        assert_eq!(
            (event[0].ts_ns, event[0].kind, event[0].arg),
            (1, RecordKind::OpStart, 1)
        );
        // More events than flags, a column short or long, an overlong varint, a kind past
        // the last: each fails the chunk.
        assert!(decodes(2, one).is_err());
        assert!(decodes(u32::MAX, one).is_err());
        let mut short = one;
        short[4] = &[];
        assert!(decodes(1, short).is_err());
        let mut long = one;
        long[2] = &[3, 3];
        assert!(decodes(1, long).is_err());
        let mut overlong = one;
        overlong[5] = &[0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert!(decodes(1, overlong).is_err());
        let mut kind = one;
        kind[1] = &[17];
        assert!(decodes(1, kind).is_err());
    }
}
