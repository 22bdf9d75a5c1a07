//! A recording's frames read one at a time from the file, so an export holds one frame in
//! memory whatever the file's size. It stops where [`parse_recording`](super::super::parse_recording)
//! stops: at the end of the file, at a frame cut off (what it read is then a prefix of the
//! run), or at a corrupt or out-of-place frame (an error naming the frame and its offset).
#![forbid(unsafe_code)]

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use crate::record::format::{
    decode_payload, Frame, FILE_HEADER_LEN, FRAME_HEADER_LEN, MAX_FRAME_BYTES,
};
use crate::record::reader::{check_file_header, frame_header, FrameHeader};
use crate::record::RecordError;

/// Why the frames stopped before the end of a whole recording.
#[derive(Debug)]
pub(super) enum Stop {
    /// The file ends inside a frame or before the end frame.
    CutOff {
        /// Bytes of whole frames read (the file header included).
        read_bytes: u64,
        /// Bytes of a frame whose rest is missing.
        partial_bytes: u64,
    },
    /// A frame is corrupt or out of place.
    Corrupt(RecordError),
}

/// The frames of one recording, in file order.
pub(super) struct FrameStream {
    reader: BufReader<File>,
    path: String,
    offset: u64,
    index: u64,
    ended: bool,
    stop: Option<Stop>,
    payload: Vec<u8>,
}

impl FrameStream {
    /// Opens `path` and checks its file header (magic and version).
    pub(super) fn open(path: &Path) -> Result<FrameStream, RecordError> {
        let shown = path.display().to_string();
        let read_error = |source| RecordError::Read {
            path: shown.clone(),
            source,
        };
        let file = File::open(path).map_err(read_error)?;
        let mut reader = BufReader::with_capacity(1 << 20, file);
        let mut head = [0u8; FILE_HEADER_LEN];
        let got = read_up_to(&mut reader, &mut head).map_err(read_error)?;
        check_file_header(&head[..got], &shown)?;
        Ok(FrameStream {
            reader,
            path: shown,
            offset: FILE_HEADER_LEN as u64,
            index: 0,
            ended: false,
            stop: None,
            payload: Vec::new(),
        })
    }

    /// The next frame, or `None` at the end of the frames (see [`FrameStream::stop`]).
    pub(super) fn next_frame(&mut self) -> Option<Frame> {
        if self.stop.is_some() {
            return None;
        }
        match self.read_frame() {
            Ok(frame) => frame,
            Err(stop) => {
                self.stop = Some(stop);
                None
            }
        }
    }

    /// Why the frames stopped early, once [`FrameStream::next_frame`] gave `None` (`None`:
    /// the recording is whole).
    pub(super) fn take_stop(&mut self) -> Option<Stop> {
        self.stop.take()
    }

    fn read_frame(&mut self) -> Result<Option<Frame>, Stop> {
        let mut header = [0u8; FRAME_HEADER_LEN];
        let got = read_up_to(&mut self.reader, &mut header).map_err(|error| self.io(error))?;
        if got == 0 {
            return match self.ended {
                true => Ok(None),
                false => Err(self.cut_off(0)),
            };
        }
        let Some(FrameHeader { length, crc, .. }) = frame_header(&header[..got]) else {
            return Err(self.cut_off(got as u64));
        };
        if self.ended {
            return Err(self.corrupt("follows the end frame".to_string()));
        }
        if length > MAX_FRAME_BYTES {
            let why = format!("declares {length} bytes, more than any recording's frame holds");
            return Err(self.corrupt(why));
        }
        self.payload.resize(length, 0);
        let got = read_up_to(&mut self.reader, &mut self.payload).map_err(|e| self.io(e))?;
        if got < length {
            return Err(self.cut_off((FRAME_HEADER_LEN + got) as u64));
        }
        let frame =
            decode_payload(&self.payload, crc).map_err(|why| self.corrupt(why.to_string()))?;
        match (self.index, &frame) {
            (0, Frame::Header(_)) | (1.., Frame::Chunk(_) | Frame::Tables(_)) => {}
            (1.., Frame::Summary(_) | Frame::Shape(_) | Frame::Runs(_) | Frame::Checkpoint(_)) => {}
            (1.., Frame::End(_)) => self.ended = true,
            _ => {
                let why = "is out of place: a recording has one header frame, first";
                return Err(self.corrupt(why.to_string()));
            }
        }
        self.offset += (FRAME_HEADER_LEN + length) as u64;
        self.index += 1;
        Ok(Some(frame))
    }

    fn cut_off(&self, partial_bytes: u64) -> Stop {
        Stop::CutOff {
            read_bytes: self.offset,
            partial_bytes,
        }
    }

    fn corrupt(&self, why: String) -> Stop {
        Stop::Corrupt(RecordError::Corrupt {
            path: self.path.clone(),
            frame: self.index,
            offset: self.offset,
            why,
        })
    }

    fn io(&self, source: std::io::Error) -> Stop {
        Stop::Corrupt(RecordError::Read {
            path: self.path.clone(),
            source,
        })
    }
}

/// Fills `buf` from `reader` as far as the file goes; returns the bytes read.
fn read_up_to(reader: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(read) => filled += read,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(filled)
}
