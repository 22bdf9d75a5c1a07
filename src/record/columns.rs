//! Event chunks and op runs as postcard stores them: column by column.
//!
//! ```text
//! events = count (u32) | times | kinds | threads | devices | names | aux | args | flags
//! runs   = count (u32) | op ids | iterations | indexes
//! column = postcard bytes (length, then the bytes): `count` values, each in postcard's
//!          own encoding of its type, one after the other
//! times, args, op ids, iterations = i64: each value minus the one before (the first's
//!          minus 0)
//! kinds  = RecordKind (its variant index: a byte)
//! threads, names, aux, indexes = u32;  devices = u16;  flags = u8
//! ```
//! Every column is exactly what postcard writes for its values (varints, i64 zig-zagged;
//! the tests check it value by value), so the format is postcard's. The writer produces a
//! column with a loop over the items that writes the varint bytes into one buffer, rather
//! than handing postcard each field of each item through serde, which makes a serializer
//! call, a small copy and a capacity check per value. The reader takes each value back with
//! postcard's own deserializer.
//!
//! The deltas are small because of the order things come in: the collector drains events
//! thread by thread in time order, so consecutive stamps are close and consecutive args
//! are mostly the same op id (an op's queued, start and end events) or the engine's next
//! ones; op runs are written in op id order, and the iteration grows with the op id.
//! Wrapping arithmetic makes any `u64` round-trip.
//!
//! A column that holds fewer values than `count`, more bytes than its values, or a value
//! postcard refuses (an overlong varint, a kind past the last) fails the frame's decoding,
//! so a corrupt frame is an error, never a wrong event. `count` is checked against the
//! columns' sizes (a value takes a byte at least) before anything is allocated for it.
#![forbid(unsafe_code)]

use std::cell::RefCell;

use serde::de::Error as _;
use serde::ser::SerializeTuple;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::format::{RecordKind, RecordedEvent};
use super::graph::OpRun;

/// A chunk's events: `#[serde(with = "columns::events")]` on a `Vec<RecordedEvent>`.
pub(crate) mod events {
    use super::*;

    pub(super) const NAMES: [&str; 8] = [
        "times", "kinds", "threads", "devices", "names", "aux", "args", "flags",
    ];

    /// Writes `events` column by column (module `columns`).
    pub(crate) fn serialize<S: Serializer>(
        events: &[RecordedEvent],
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        let fills: [Fill<RecordedEvent>; 8] = [
            |events, out| deltas(events, out, |event| event.ts_ns),
            |events, out| bytes(events, out, |event| event.kind as u8),
            |events, out| varints(events, out, |event| u64::from(event.thread)),
            |events, out| varints(events, out, |event| u64::from(event.device)),
            |events, out| varints(events, out, |event| u64::from(event.name)),
            |events, out| varints(events, out, |event| u64::from(event.aux)),
            |events, out| deltas(events, out, |event| event.arg),
            |events, out| bytes(events, out, |event| event.flags),
        ];
        write(serializer, events, &fills)
    }

    /// Reads the events [`serialize`] wrote, with their absolute times.
    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Vec<RecordedEvent>, D::Error> {
        let (count, mut columns) = Columns::read(deserializer, NAMES)?;
        let decode = |columns: &mut Columns<'de, 8>| {
            let mut events = Vec::with_capacity(count);
            let (mut ts_ns, mut arg) = (0u64, 0u64);
            for _ in 0..count {
                ts_ns = ts_ns.wrapping_add(columns.next::<i64>(0)? as u64);
                let kind: RecordKind = columns.next(1)?;
                let thread = columns.next(2)?;
                let device = columns.next(3)?;
                let name = columns.next(4)?;
                let aux = columns.next(5)?;
                arg = arg.wrapping_add(columns.next::<i64>(6)? as u64);
                let flags = columns.next(7)?;
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
            Ok(events)
        };
        let events = decode(&mut columns).and_then(|events| columns.finish().map(|()| events));
        events.map_err(D::Error::custom)
    }
}

/// Op runs: `#[serde(with = "columns::runs")]` on a `Vec<OpRun>` (in op id order: any
/// order round-trips, that one writes small deltas).
pub(crate) mod runs {
    use super::*;

    pub(super) const NAMES: [&str; 3] = ["op ids", "iterations", "indexes"];

    /// Writes `runs` column by column (module `columns`).
    pub(crate) fn serialize<S: Serializer>(
        runs: &[OpRun],
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        let fills: [Fill<OpRun>; 3] = [
            |runs, out| deltas(runs, out, |run| run.op_id),
            |runs, out| deltas(runs, out, |run| run.iteration),
            |runs, out| varints(runs, out, |run| u64::from(run.index)),
        ];
        write(serializer, runs, &fills)
    }

    /// Reads the runs [`serialize`] wrote.
    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Vec<OpRun>, D::Error> {
        let (count, mut columns) = Columns::read(deserializer, NAMES)?;
        let decode = |columns: &mut Columns<'de, 3>| {
            let mut runs = Vec::with_capacity(count);
            let (mut op_id, mut iteration) = (0u64, 0u64);
            for _ in 0..count {
                op_id = op_id.wrapping_add(columns.next::<i64>(0)? as u64);
                iteration = iteration.wrapping_add(columns.next::<i64>(1)? as u64);
                let index = columns.next(2)?;
                runs.push(OpRun {
                    op_id,
                    iteration,
                    index,
                });
            }
            Ok(runs)
        };
        let runs = decode(&mut columns).and_then(|runs| columns.finish().map(|()| runs));
        runs.map_err(D::Error::custom)
    }
}

/// Writes a column of a value of each item at the start of a buffer of [`MAX_VARINT`]
/// bytes an item; returns the bytes written.
type Fill<T> = fn(&[T], &mut [u8]) -> usize;

/// Bytes a varint of a `u64` takes at most.
const MAX_VARINT: usize = 10;

/// Column bytes a thread keeps from one frame to the next at most: the recorder's chunks
/// ([`CHUNK_EVENTS`](super::writer::CHUNK_EVENTS) events) fit, a larger one gets a buffer of
/// its own.
const KEEP_BYTES: usize = 1 << 20;
const _: () = assert!(super::writer::CHUNK_EVENTS * MAX_VARINT <= KEEP_BYTES);

thread_local! {
    /// The buffer the columns are made in, kept by each thread that writes them, so a
    /// writer's chunks allocate and zero it once.
    static BUFFER: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Serializes `count`, then each column `fills` makes of `items`, as bytes. The columns are
/// made one after the other in one buffer of [`MAX_VARINT`] bytes an item (the thread's
/// kept one, where it fits).
fn write<T, S: Serializer>(
    serializer: S,
    items: &[T],
    fills: &[Fill<T>],
) -> Result<S::Ok, S::Error> {
    let count = u32::try_from(items.len()).map_err(serde::ser::Error::custom)?;
    let size = items.len() * MAX_VARINT;
    if size > KEEP_BYTES {
        return write_in(serializer, count, items, fills, &mut vec![0; size]);
    }
    // Nothing below writes columns again, so the buffer is never borrowed twice.
    BUFFER.with_borrow_mut(|buffer| {
        if buffer.len() < size {
            buffer.resize(size, 0);
        }
        write_in(serializer, count, items, fills, buffer)
    })
}

/// [`write`] of the `count` `items` in `buffer` (at least [`MAX_VARINT`] bytes an item;
/// what it holds is overwritten before it is read).
fn write_in<T, S: Serializer>(
    serializer: S,
    count: u32,
    items: &[T],
    fills: &[Fill<T>],
    buffer: &mut [u8],
) -> Result<S::Ok, S::Error> {
    let mut tuple = serializer.serialize_tuple(1 + fills.len())?;
    tuple.serialize_element(&count)?;
    for fill in fills {
        let written = fill(items, buffer);
        tuple.serialize_element(&Bytes(&buffer[..written]))?;
    }
    tuple.end()
}

/// A byte slice that serde writes as bytes (postcard: its length, then the bytes).
struct Bytes<'a>(&'a [u8]);

impl Serialize for Bytes<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(self.0)
    }
}

/// Writes a byte of each item (postcard's `u8`, and its variant index of an enum of fewer
/// than 128 variants).
#[inline(always)]
fn bytes<T>(items: &[T], buffer: &mut [u8], value: impl Fn(&T) -> u8) -> usize {
    for (byte, item) in buffer.iter_mut().zip(items) {
        *byte = value(item);
    }
    items.len()
}

/// Writes a varint of each item's value: seven bits a byte, low first, the high bit set
/// on every byte but the last (postcard's `u16`, `u32` and `u64`).
#[inline(always)]
fn varints<T>(items: &[T], buffer: &mut [u8], mut value: impl FnMut(&T) -> u64) -> usize {
    let mut at = 0;
    for item in items {
        let mut value = value(item);
        while value >= 0x80 {
            buffer[at] = value as u8 | 0x80;
            at += 1;
            value >>= 7;
        }
        buffer[at] = value as u8;
        at += 1;
    }
    at
}

/// Writes each item's value minus the one before (the first's minus 0), zig-zagged as
/// postcard stores an `i64`: small magnitudes of either sign take a byte or two.
#[inline(always)]
fn deltas<T>(items: &[T], buffer: &mut [u8], value: impl Fn(&T) -> u64) -> usize {
    let mut previous = 0u64;
    varints(items, buffer, |item| {
        let current = value(item);
        let delta = current.wrapping_sub(previous) as i64;
        previous = current;
        ((delta << 1) ^ (delta >> 63)) as u64
    })
}

/// Why a frame's columns do not decode.
#[derive(Debug, thiserror::Error)]
enum ColumnError {
    #[error("its {0} column holds {1} bytes for {2} values")]
    Count(&'static str, usize, u32),
    #[error("its {0} column does not decode: {1}")]
    Value(&'static str, postcard::Error),
    #[error("its {0} column has bytes after its last value")]
    Trailing(&'static str),
}

/// A frame's columns being read, each through postcard's deserializer.
struct Columns<'de, const N: usize> {
    columns: [postcard::Deserializer<'de, postcard::de_flavors::Slice<'de>>; N],
    names: [&'static str; N],
}

impl<'de, const N: usize> Columns<'de, N> {
    /// Reads `count` and the columns' bytes (borrowed from the input: postcard's
    /// `from_bytes`, which every frame goes through, lends them); refuses a count that
    /// some column has fewer bytes than.
    fn read<D: Deserializer<'de>>(
        deserializer: D,
        names: [&'static str; N],
    ) -> Result<(usize, Self), D::Error>
    where
        [&'de [u8]; N]: Deserialize<'de>,
    {
        let (count, columns) = <(u32, [&'de [u8]; N])>::deserialize(deserializer)?;
        for (column, name) in columns.iter().zip(names) {
            if column.len() < count as usize {
                return Err(D::Error::custom(ColumnError::Count(
                    name,
                    column.len(),
                    count,
                )));
            }
        }
        let columns = columns.map(postcard::Deserializer::from_bytes);
        Ok((count as usize, Columns { columns, names }))
    }

    /// The next value of column `at`.
    #[inline(always)]
    fn next<T: Deserialize<'de>>(&mut self, at: usize) -> Result<T, ColumnError> {
        T::deserialize(&mut self.columns[at])
            .map_err(|error| ColumnError::Value(self.names[at], error))
    }

    /// Checks that every column was read to its end.
    fn finish(self) -> Result<(), ColumnError> {
        for (column, name) in self.columns.into_iter().zip(self.names) {
            let rest = column
                .finalize()
                .map_err(|error| ColumnError::Value(name, error))?;
            if !rest.is_empty() {
                return Err(ColumnError::Trailing(name));
            }
        }
        Ok(())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A chunk's events, as a frame holds them.
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Events(#[serde(with = "super::events")] Vec<RecordedEvent>);

    /// Op runs, as a frame holds them.
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Runs(#[serde(with = "super::runs")] Vec<OpRun>);

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

    /// A value of any size, extremes included.
    fn any(rng: &mut fastrand::Rng) -> u64 {
        match rng.u8(0..4) {
            0 => rng.u64(0..128),
            1 => rng.u64(..1 << 21),
            2 => rng.u64(..),
            _ => [0, u64::MAX, 1 << 63, (1 << 63) - 1][rng.usize(0..4)],
        }
    }

    /// Events with every kind and values of every size.
    fn some_events(count: usize, seed: u64) -> Vec<RecordedEvent> {
        let mut rng = fastrand::Rng::with_seed(seed);
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

    fn some_runs(count: usize, seed: u64) -> Vec<OpRun> {
        let mut rng = fastrand::Rng::with_seed(seed);
        (0..count)
            .map(|_| OpRun {
                op_id: any(&mut rng),
                iteration: any(&mut rng),
                index: any(&mut rng) as u32,
            })
            .collect()
    }

    #[test]
    fn events_and_runs_round_trip_exactly() {
        for count in [0, 1, 2, 17, 1000] {
            let events = Events(some_events(count, count as u64));
            let bytes = postcard::to_stdvec(&events).unwrap();
            assert_eq!(postcard::from_bytes::<Events>(&bytes).unwrap(), events);
            let runs = Runs(some_runs(count, count as u64));
            let bytes = postcard::to_stdvec(&runs).unwrap();
            assert_eq!(postcard::from_bytes::<Runs>(&bytes).unwrap(), runs);
        }
    }

    /// `(count, columns)` of a frame's bytes.
    fn columns<const N: usize>(bytes: &[u8]) -> (u32, [&[u8]; N])
    where
        for<'de> [&'de [u8]; N]: Deserialize<'de>,
    {
        postcard::from_bytes(bytes).unwrap()
    }

    /// Postcard's bytes of `value`, appended to `column`.
    fn put(column: &mut Vec<u8>, value: impl Serialize) {
        column.extend(postcard::to_stdvec(&value).unwrap());
    }

    /// Every column is postcard's encoding of its values: writing them one by one with
    /// postcard gives its bytes.
    #[test]
    fn every_column_is_postcard_of_its_values() {
        let events = some_events(500, 25);
        let mut expected: [Vec<u8>; 8] = Default::default();
        let (mut ts, mut arg) = (0u64, 0u64);
        for event in &events {
            put(&mut expected[0], event.ts_ns.wrapping_sub(ts) as i64);
            put(&mut expected[1], event.kind);
            put(&mut expected[2], event.thread);
            put(&mut expected[3], event.device);
            put(&mut expected[4], event.name);
            put(&mut expected[5], event.aux);
            put(&mut expected[6], event.arg.wrapping_sub(arg) as i64);
            put(&mut expected[7], event.flags);
            (ts, arg) = (event.ts_ns, event.arg);
        }
        let bytes = postcard::to_stdvec(&Events(events)).unwrap();
        let (count, written) = columns::<8>(&bytes);
        assert_eq!(count, 500);
        for (at, name) in events::NAMES.iter().enumerate() {
            assert_eq!(written[at], &expected[at][..], "the {name} column");
        }

        let runs = some_runs(500, 26);
        let mut expected: [Vec<u8>; 3] = Default::default();
        let (mut op_id, mut iteration) = (0u64, 0u64);
        for run in &runs {
            put(&mut expected[0], run.op_id.wrapping_sub(op_id) as i64);
            put(
                &mut expected[1],
                run.iteration.wrapping_sub(iteration) as i64,
            );
            put(&mut expected[2], run.index);
            (op_id, iteration) = (run.op_id, run.iteration);
        }
        let bytes = postcard::to_stdvec(&Runs(runs)).unwrap();
        let (count, written) = columns::<3>(&bytes);
        assert_eq!(count, 500);
        for (at, name) in runs::NAMES.iter().enumerate() {
            assert_eq!(written[at], &expected[at][..], "the {name} column");
        }
    }

    fn decodes(count: u32, columns: [&[u8]; 8]) -> Result<Events, postcard::Error> {
        let bytes = postcard::to_stdvec(&(count, columns.map(Bytes))).unwrap();
        postcard::from_bytes(&bytes)
    }

    #[test]
    fn columns_that_do_not_fit_their_count_are_refused() {
        let one: [&[u8]; 8] = [&[2], &[1], &[3], &[0], &[7], &[0], &[2], &[0]];
        let event = decodes(1, one).unwrap().0;
        assert_eq!(
            (event[0].ts_ns, event[0].kind, event[0].arg),
            (1, RecordKind::OpStart, 1)
        );
        // More events than bytes, a column short or long, an overlong varint, a kind past
        // the last: each fails the chunk.
        assert!(decodes(2, one).is_err());
        assert!(decodes(u32::MAX, one).is_err());
        let mut short = one;
        short[4] = &[0x80];
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
