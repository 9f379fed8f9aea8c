//! Point-to-point: [`Communicator::send`] and [`Communicator::recv`]. A send is two
//! messages to its peer, its header row and then its elements, so the receiver learns the
//! dtype and shape from the sender (it passes only the source and the tag).

use std::sync::Arc;

use polytensor_core::{Device, Error, Result, Tensor};

use super::collectives::{receiving, words};
use super::memory::{outgoing, Outgoing};
use super::pending::Transfer;
use super::raw::{self, Start};
use super::{Communicator, Pending};
use crate::header::{self, Kind, WORDS};
use crate::rules::check_pod;

/// The largest tag a send takes: its two messages use MPI tags `2 tag` and `2 tag + 1`,
/// and MPI guarantees tags up to 32767.
pub const MAX_TAG: u16 = 16383;

/// The MPI tags of a send's header and elements.
fn tags(tag: u16) -> Result<(i32, i32)> {
    if tag > MAX_TAG {
        return Err(Error::invalid(format!(
            "send/recv tags go up to {MAX_TAG}, got {tag}"
        )));
    }
    let header = i32::from(tag) * 2;
    Ok((header, header + 1))
}

impl Communicator {
    /// An `Err` unless `peer` is a rank of this communicator.
    fn check_peer(&self, peer: usize, name: &str) -> Result<i32> {
        if peer >= self.size() {
            return Err(Error::invalid(format!(
                "{name}: rank {peer} is not in a communicator of {} ranks",
                self.size()
            )));
        }
        Ok(peer as i32)
    }

    /// Send `tensor` (any fixed-size dtype, any device) to rank `dest`, which receives it
    /// with [`recv`](Self::recv) from this rank with the same `tag` (up to [`MAX_TAG`]).
    /// Returns once the tensor may be reused (MPI's standard-mode send).
    pub fn send(&self, tensor: &Tensor, dest: usize, tag: u16) -> Result<()> {
        self.start_send(tensor, dest, tag)?.wait()
    }

    /// [`send`](Self::send), started.
    pub fn start_send(&self, tensor: &Tensor, dest: usize, tag: u16) -> Result<Pending<'_, ()>> {
        self.check_usable()?;
        let peer = self.check_peer(dest, "send")?;
        let (header_tag, data_tag) = tags(tag)?;
        header::check_rank(tensor.shape())?;
        check_pod(tensor.dtype(), "send")?;
        let row = header::row(Kind::Send, 0, tensor.dtype(), tensor.shape());
        // The row's words, bit for bit, in memory the transfer owns.
        let row = Outgoing::words(row.iter().map(|&w| w as u64).collect());
        let row_type = raw::row_type();
        let (word, count) = words(tensor.num_elements(), tensor.dtype(), "send")?;
        let data = outgoing(tensor)?;
        let data_ptr = data.ptr;
        let send_row = Start::Send {
            buffer: row.ptr,
            count: WORDS as i32,
            dtype: row_type,
            peer,
            tag: header_tag,
        };
        let transfer = Transfer::new(vec![row, data], None, |_| Ok(()));
        // SAFETY: the transfer holds the row (WORDS words).
        let mut transfer = unsafe { transfer.with_start(send_row) };
        if count > 0 {
            let send_data = Start::Send {
                buffer: data_ptr,
                count,
                dtype: word,
                peer,
                tag: data_tag,
            };
            // SAFETY: the transfer holds the tensor's bytes.
            transfer = unsafe { transfer.with_start(send_data) };
        }
        let what = format!("send to rank {dest} (tag {tag}) on rank {}", self.rank());
        Pending::moving(self, what, transfer)
    }

    /// The tensor rank `source` sends with `tag` ([`send`](Self::send)), on `device`: its
    /// dtype and shape are the sender's.
    pub fn recv(&self, source: usize, tag: u16, device: &Arc<dyn Device>) -> Result<Tensor> {
        self.start_recv(source, tag, device)?.wait()
    }

    /// [`recv`](Self::recv), started.
    pub fn start_recv(
        &self,
        source: usize,
        tag: u16,
        device: &Arc<dyn Device>,
    ) -> Result<Pending<'_>> {
        self.check_usable()?;
        let peer = self.check_peer(source, "recv")?;
        let (header_tag, data_tag) = tags(tag)?;
        let mut row = vec![0i64; WORDS].into_boxed_slice();
        let start = Start::Recv {
            buffer: row.as_mut_ptr().cast(),
            count: WORDS as i32,
            dtype: raw::row_type(),
            peer,
            tag: header_tag,
        };
        // SAFETY: `row` has room for WORDS words and is owned by the Pending until the
        // request completes.
        let request = unsafe { start.on(self.handle.comm, false)? };
        let device = device.clone();
        let what = format!(
            "recv from rank {source} (tag {tag}) on rank {}",
            self.rank()
        );
        Ok(Pending::new(
            self,
            what,
            request,
            Box::new([]),
            row,
            Box::new(move |flat: &[i64]| {
                let rows = header::split_rows(flat);
                let sent = rows
                    .first()
                    .filter(|r| r[0] == Kind::Send as i64)
                    .ok_or_else(|| Error::invalid("recv: the message is not a polytensor send"))?;
                let (dtype, shape) = header::tensor_of(sent)?;
                let (word, count) = words(shape.num_elements(), dtype, "recv")?;
                // SAFETY: `count` words are the tensor the header describes; MPI writes at
                // most them (a longer message is an error, not an overrun).
                unsafe {
                    receiving(shape, dtype, &device, |buffer| Start::Recv {
                        buffer,
                        count,
                        dtype: word,
                        peer,
                        tag: data_tag,
                    })
                }
            }),
        ))
    }
}
