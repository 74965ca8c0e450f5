//! The assembler's fast path: whole, well-formed JSON transactions, scanned without a Python
//! object per record.
//!
//! `assembler/machine.py` is the state machine and stays the only judge: this scanner takes a
//! transaction only when the machine would emit it unchanged (a `TXN_BEGIN`, its `DATA`, its
//! `TXN_END`, every check passed) and stops at anything else, handing the machine that
//! transaction from its `TXN_BEGIN` on. It also carries a clean transaction across calls: one
//! still open at the end of the records is handed back as the machine would have buffered it,
//! and one the state holds open is continued. Rejects, gaps and every other case are the
//! machine's. So the scanner may accept less than the machine, never more: where
//! serde_json and the Python decoder could differ (escaped surrogates, a JSON array for an
//! object, duplicate fields), it stops. `tests/unit/assembler/test_fast_path.py` checks the
//! two against each other.

use std::borrow::Cow;
use std::collections::HashMap;

use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple, PyType};
use serde::de::IgnoredAny;
use serde::Deserialize;

/// `assembler.buffer.HEADER_SIZE`: what `max-txn-bytes` counts per DATA event besides its text.
const HEADER_SIZE: usize = 17;
/// `len(assembler.output.OUTPUT_FIELDS)`.
const OUTPUT_FIELDS: usize = 15;
/// Database and table names are stored with 16-bit lengths in the state buffer.
const MAX_NAME_BYTES: usize = 0xFFFF;

/// One event, with the names and types of `conf/events.avsc` (missing nullable fields: `None`).
#[derive(Deserialize)]
struct Event<'a> {
    #[serde(borrow)]
    txn_id: Cow<'a, str>,
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    // Borrowed from the record's bytes unless escaped (serde makes an Option's Cow owned
    // without `borrow`).
    #[serde(borrow)]
    database: Option<Cow<'a, str>>,
    #[serde(borrow)]
    table: Option<Cow<'a, str>>,
    #[serde(borrow)]
    op: Option<Cow<'a, str>>,
    #[serde(borrow)]
    row: Option<Cow<'a, str>>,
    source_ts_ms: Option<i64>,
    event_count: Option<i64>,
}

/// A DATA event buffered until its transaction's end: (offset, database, table, op code, row).
struct Data<'a> {
    offset: i64,
    database: Cow<'a, str>,
    table: Cow<'a, str>,
    op: usize,
    row: Cow<'a, str>,
}

/// The targets asked about in one call, with the answer: a few tables, so a list searched
/// without building a key per DATA event.
type Targets = Vec<(String, String, bool)>;

impl Data<'_> {
    /// Its bytes in the state buffer: what `max-txn-bytes` counts (`buffer.buffered_size`).
    fn size(&self) -> usize {
        HEADER_SIZE + self.database.len() + self.table.len() + self.row.len()
    }
}

/// One transaction the machine would emit as is, or hold open as is.
struct Txn<'a> {
    txn_id: Cow<'a, str>,
    first_offset: i64,
    end_offset: i64,
    source_ts_ms: Option<i64>,
    /// The `TXN_BEGIN`'s `source_ts_ms`, and the latest one seen (the state's fields).
    begin_ts: Option<i64>,
    last_ts: Option<i64>,
    /// DATA buffered in earlier calls: the state's buffer (`assembler.buffer`), its rows.
    prior: &'a [u8],
    prior_rows: usize,
    /// What `max-txn-bytes` counts of all the DATA so far, earlier calls' included.
    bytes: usize,
    rows: Vec<Data<'a>>,
}

impl Txn<'_> {
    fn row_count(&self) -> usize {
        self.prior_rows + self.rows.len()
    }
}

/// What `one_txn` found at `records[at..]`.
enum Scanned<'a> {
    /// A whole transaction the machine would emit unchanged; the machine goes on at `usize`.
    Whole(usize, Txn<'a>),
    /// The records ended inside a clean transaction, last offset `i64`: the machine would
    /// hold it open, buffered, exactly as it stands.
    Open(i64, Txn<'a>),
    /// The machine must decide, from `at` on.
    Stop,
}

/// A transaction the state holds open, as `scan` receives it from the machine.
type Held = (
    String,
    i64,
    Option<i64>,
    Option<i64>,
    usize,
    usize,
    Py<PyBytes>,
);

fn is_json_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// Starts with `{` after JSON whitespace: serde would also read a JSON array into a struct.
fn looks_like_object(text: &[u8]) -> bool {
    text.iter().find(|b| !is_json_space(**b)) == Some(&b'{')
}

/// The event, or `None` where the machine must decide (not UTF-8, not JSON, not an object, a
/// type the schema refuses, an `event_count` beyond an Avro int).
fn parse_event(value: &[u8]) -> Option<Event<'_>> {
    if !looks_like_object(value) {
        return None;
    }
    // The whole record is checked: `from_slice` checks only the strings it keeps, so an
    // unknown field's invalid UTF-8 passed here while the Python decoder refuses the record.
    // Parsed as text, too, it costs ~0.1 µs a record less.
    let text = std::str::from_utf8(value).ok()?;
    // So is an escaped surrogate anywhere in it: serde skips an ignored string's escapes
    // unchecked, and the Python decoder refuses a record with a lone one in any string.
    if has_surrogate_escape(value) {
        return None;
    }
    let event: Event = serde_json::from_str(text).ok()?;
    match event.event_count {
        Some(n) if i32::try_from(n).is_err() => None,
        _ => Some(event),
    }
}

/// A row the machine accepts: a JSON object, with no escaped UTF-16 surrogate (the Python
/// decoder refuses a lone one; a pair is left to it as well).
fn row_is_object(row: &str) -> bool {
    let bytes = row.as_bytes();
    if !looks_like_object(bytes) {
        return false;
    }
    if has_surrogate_escape(bytes) {
        return false;
    }
    serde_json::from_str::<IgnoredAny>(row).is_ok()
}

/// A `\uD...` escape: a UTF-16 surrogate, which the Python side judges. Also true of an
/// escaped backslash before `uD` (`\\uD`), which only sends the record to the machine.
fn has_surrogate_escape(text: &[u8]) -> bool {
    // memchr's SIMD search for the backslashes: every record is checked.
    memchr::memchr_iter(b'\\', text)
        .any(|at| matches!(text.get(at + 1..at + 3), Some([b'u', d]) if d | 0x20 == b'd'))
}

/// The op code of `assembler.buffer.OP_CODES`; `None` for an op the machine rejects.
fn op_code(op: Option<&str>) -> Option<usize> {
    match op {
        None | Some("UPSERT") => Some(0),
        Some("DELETE") => Some(1),
        _ => None,
    }
}

/// The fields of a `SourceRecord` the scanner reads (topic, partition, offset, value).
struct Record<'r, 'py> {
    topic: Bound<'py, PyAny>,
    partition: i64,
    offset: i64,
    value: Option<&'r [u8]>,
}

#[pyclass(frozen, module = "txncdc_native")]
struct JsonTxnScanner {
    max_rows: i64,
    max_bytes: i64,
    /// `Targets.problem(database, table)`, or `None` when DATA may target any table.
    targets: Option<PyObject>,
    /// `assembler.output.OutputRow`: its rows are allocated here (`JsonTxnScanner::output_row`).
    output_row: PyObject,
    kind_row: Py<PyString>,
    op_names: [Py<PyString>; 2],
}

#[pymethods]
impl JsonTxnScanner {
    #[new]
    #[pyo3(signature = (max_rows, max_bytes, targets, output_row))]
    fn new(
        py: Python<'_>,
        max_rows: i64,
        max_bytes: i64,
        targets: Option<PyObject>,
        output_row: PyObject,
    ) -> PyResult<Self> {
        let is_row_type = output_row
            .bind(py)
            .downcast::<PyType>()
            .map(|t| t.is_subclass_of::<PyTuple>())
            .unwrap_or(Ok(false))?;
        let fields = output_row.bind(py).getattr("_fields").and_then(|f| f.len());
        if !is_row_type || fields.ok() != Some(OUTPUT_FIELDS) {
            return Err(PyValueError::new_err(
                "output_row must be assembler.output.OutputRow (a named tuple of 15 fields)",
            ));
        }
        Ok(Self {
            max_rows,
            max_bytes,
            targets,
            output_row,
            kind_row: PyString::intern(py, "ROW").unbind(),
            op_names: [
                PyString::intern(py, "UPSERT").unbind(),
                PyString::intern(py, "DELETE").unbind(),
            ],
        })
    }

    /// Take the transactions of `records[start:]` that the machine would emit, or hold open,
    /// unchanged.
    ///
    /// `records` are one partition's `SourceRecord`s sorted by offset, the partition at
    /// `last_offset` and `txn_seq`. `held` is the transaction the state holds open, if any, as
    /// `(txn_id, first_offset, begin_ts, last_ts, rows, bytes, buffer)` with nothing of it
    /// pending outside `buffer`; `None`: the partition is idle. Appends the transactions'
    /// `OutputRow`s to `out` and returns `(next, last_offset, txn_seq, held)`: the machine
    /// goes on from `records[next]`, at a `TXN_BEGIN` the scanner left to it or at whatever
    /// else, with the transaction left open (the same tuple; `None`: idle). When `next` is
    /// `start` nothing was taken, and the machine's state stands as it was.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (records, start, last_offset, txn_seq, topic, partition, out, held=None))]
    fn scan<'py>(
        &self,
        py: Python<'py>,
        records: &Bound<'py, PyList>,
        start: usize,
        last_offset: i64,
        txn_seq: i64,
        topic: &Bound<'py, PyString>,
        partition: i64,
        out: &Bound<'py, PyList>,
        held: Option<Held>,
    ) -> PyResult<(usize, i64, i64, Option<PyObject>)> {
        let mut at = start;
        let mut last = last_offset;
        let mut seq = txn_seq;
        let mut checked: Targets = Vec::new();
        let mut names: HashMap<String, Bound<'py, PyString>> = HashMap::new();
        let prior = held.as_ref().map(|o| o.6.bind(py).clone());
        let mut resumed = held.as_ref().zip(prior.as_ref()).map(|(o, buffer)| Txn {
            txn_id: Cow::Borrowed(o.0.as_str()),
            first_offset: o.1,
            end_offset: o.1,
            source_ts_ms: None,
            begin_ts: o.2,
            last_ts: o.3,
            prior: buffer.as_bytes(),
            prior_rows: o.4,
            bytes: o.5,
            rows: Vec::new(),
        });
        loop {
            let resumed = resumed.take();
            match self.one_txn(
                py,
                records,
                at,
                last,
                topic,
                partition,
                &mut checked,
                resumed,
            )? {
                Scanned::Whole(next, txn) => {
                    if txn.row_count() > 0 {
                        seq += 1;
                        self.emit(py, &txn, seq, topic, partition, &mut names, out)?;
                    }
                    at = next;
                    last = txn.end_offset;
                }
                Scanned::Open(end_last, txn) => {
                    let held = held_open(py, &txn)?;
                    return Ok((records.len(), end_last, seq, Some(held)));
                }
                // Idle at `at`; or, stopped inside the transaction the state holds, at
                // `start` with nothing taken.
                Scanned::Stop => return Ok((at, last, seq, None)),
            }
        }
    }
}

/// The state's view of a transaction held open: `(txn_id, first_offset, begin_ts, last_ts,
/// rows, bytes, buffer)`, the buffer as `assembler.buffer.encode` appends it.
fn held_open(py: Python<'_>, txn: &Txn<'_>) -> PyResult<PyObject> {
    let added: usize = txn.rows.iter().map(Data::size).sum();
    let size = txn.prior.len() + added;
    let buffer = PyBytes::new_with(py, size, |buf| {
        buf[..txn.prior.len()].copy_from_slice(txn.prior);
        let mut pos = txn.prior.len();
        for d in &txn.rows {
            let mut put = |bytes: &[u8]| {
                buf[pos..pos + bytes.len()].copy_from_slice(bytes);
                pos += bytes.len();
            };
            put(&d.offset.to_be_bytes());
            put(&[d.op as u8]);
            put(&(d.database.len() as u16).to_be_bytes());
            put(&(d.table.len() as u16).to_be_bytes());
            put(&(d.row.len() as u32).to_be_bytes());
            put(d.database.as_bytes());
            put(d.table.as_bytes());
            put(d.row.as_bytes());
        }
        Ok(())
    })?;
    let held = (
        txn.txn_id.as_ref(),
        txn.first_offset,
        txn.begin_ts,
        txn.last_ts,
        txn.row_count(),
        txn.bytes,
        buffer,
    );
    Ok(held.into_pyobject(py)?.into_any().unbind())
}

/// The DATA events of a state buffer (`assembler.buffer`), or `None` if it is not one the
/// machine reads back (truncated, not UTF-8, an unknown op code): the machine words that.
fn buffered(buf: &[u8]) -> Option<Vec<Data<'_>>> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        let header = buf.get(pos..pos + HEADER_SIZE)?;
        let offset = i64::from_be_bytes(header[0..8].try_into().ok()?);
        let op = header[8] as usize;
        let ld = u16::from_be_bytes(header[9..11].try_into().ok()?) as usize;
        let lt = u16::from_be_bytes(header[11..13].try_into().ok()?) as usize;
        let lr = u32::from_be_bytes(header[13..17].try_into().ok()?) as usize;
        pos += HEADER_SIZE;
        let mut text = |n: usize| -> Option<&str> {
            let bytes = buf.get(pos..pos + n)?;
            pos += n;
            std::str::from_utf8(bytes).ok()
        };
        let (database, table, row) = (text(ld)?, text(lt)?, text(lr)?);
        if op > 1 {
            return None;
        }
        out.push(Data {
            offset,
            database: Cow::Borrowed(database),
            table: Cow::Borrowed(table),
            op,
            row: Cow::Borrowed(row),
        });
    }
    Some(out)
}

/// Record `index` of `records`; its value is borrowed for as long as the list is.
fn record<'r, 'py>(records: &'r Bound<'py, PyList>, index: usize) -> PyResult<Record<'r, 'py>> {
    let item = records.get_item(index)?;
    let fields = item
        .downcast_into::<PyTuple>()
        .map_err(|_| PyValueError::new_err("records must be SourceRecord tuples"))?;
    let value = fields.get_item(3)?;
    let value = if value.is_none() {
        None
    } else {
        // Borrowed from the bytes object, which `records` keeps alive for the call.
        let bytes = value.downcast_into::<pyo3::types::PyBytes>()?;
        let slice: &[u8] = bytes.as_bytes();
        // SAFETY: the list holds every record and each record (a tuple) its value; the
        // scanner holds the GIL and changes neither while `records` is borrowed.
        Some(unsafe { std::slice::from_raw_parts(slice.as_ptr(), slice.len()) })
    };
    Ok(Record {
        topic: fields.get_item(0)?,
        partition: fields.get_item(1)?.extract()?,
        offset: fields.get_item(2)?.extract()?,
        value,
    })
}

impl JsonTxnScanner {
    /// The transaction at `records[at..]`, if the machine would emit it, or hold it open,
    /// unchanged; `resumed`: the one the state holds open, which `records[at..]` continue.
    #[allow(clippy::too_many_arguments)]
    fn one_txn<'a>(
        &self,
        py: Python<'_>,
        records: &'a Bound<'_, PyList>,
        at: usize,
        last_offset: i64,
        topic: &Bound<'_, PyString>,
        partition: i64,
        checked: &mut Targets,
        resumed: Option<Txn<'a>>,
    ) -> PyResult<Scanned<'a>> {
        let mut i = at;
        let mut last = last_offset;
        let mut txn: Option<Txn<'a>> = resumed;
        while i < records.len() {
            let rec = record(records, i)?;
            i += 1;
            if rec.partition != partition || !(rec.topic.is(topic) || rec.topic.eq(topic)?) {
                return Ok(Scanned::Stop); // the machine names the wiring bug
            }
            if rec.offset <= last {
                continue; // a replay: the machine skips it too
            }
            if last >= 0 && rec.offset > last + 2 {
                return Ok(Scanned::Stop); // the machine logs the skipped offsets
            }
            let Some(event) = rec.value.and_then(parse_event) else {
                return Ok(Scanned::Stop);
            };
            if event.txn_id.is_empty() {
                return Ok(Scanned::Stop);
            }
            last = rec.offset;
            let Some(open) = txn.as_mut() else {
                if event.kind != "TXN_BEGIN" {
                    return Ok(Scanned::Stop);
                }
                txn = Some(Txn {
                    txn_id: event.txn_id,
                    first_offset: rec.offset,
                    end_offset: rec.offset,
                    source_ts_ms: None,
                    begin_ts: event.source_ts_ms,
                    last_ts: event.source_ts_ms,
                    prior: &[],
                    prior_rows: 0,
                    bytes: 0,
                    rows: Vec::new(),
                });
                continue;
            };
            if event.txn_id != open.txn_id {
                return Ok(Scanned::Stop);
            }
            match event.kind.as_ref() {
                "DATA" => {
                    let Some(data) =
                        data_of(rec.offset, event.database, event.table, event.op, event.row)
                    else {
                        return Ok(Scanned::Stop);
                    };
                    if let Some(ts) = event.source_ts_ms {
                        open.last_ts = Some(ts);
                    }
                    open.bytes += data.size();
                    if !self.target_ok(py, &data, checked)? {
                        return Ok(Scanned::Stop);
                    }
                    open.rows.push(data);
                    if open.row_count() as i64 > self.max_rows || open.bytes as i64 > self.max_bytes
                    {
                        return Ok(Scanned::Stop);
                    }
                }
                "TXN_END" => {
                    if let Some(count) = event.event_count {
                        if count != open.row_count() as i64 {
                            return Ok(Scanned::Stop);
                        }
                    }
                    let mut done = txn.take().expect("open");
                    if !done.prior.is_empty() || done.prior_rows > 0 {
                        // The rows of earlier calls first, as the machine reads them back.
                        let Some(mut rows) = buffered(done.prior) else {
                            return Ok(Scanned::Stop);
                        };
                        if rows.len() != done.prior_rows {
                            return Ok(Scanned::Stop);
                        }
                        rows.append(&mut done.rows);
                        done.rows = rows;
                        done.prior = &[];
                        done.prior_rows = 0;
                    }
                    done.end_offset = rec.offset;
                    done.source_ts_ms = event.source_ts_ms.or(done.last_ts);
                    return Ok(Scanned::Whole(i, done));
                }
                _ => return Ok(Scanned::Stop),
            }
        }
        // Still open at the end of the records: held as the machine would buffer it.
        Ok(txn.map_or(Scanned::Stop, |open| Scanned::Open(last, open)))
    }

    fn target_ok(&self, py: Python<'_>, data: &Data<'_>, checked: &mut Targets) -> PyResult<bool> {
        let Some(problem) = &self.targets else {
            return Ok(true);
        };
        let (database, table) = (&*data.database, &*data.table);
        if let Some((_, _, ok)) = checked.iter().find(|(d, t, _)| d == database && t == table) {
            return Ok(*ok);
        }
        let ok = problem.call1(py, (database, table))?.is_none(py);
        checked.push((database.to_string(), table.to_string(), ok));
        Ok(ok)
    }

    #[allow(clippy::too_many_arguments)]
    fn emit<'py>(
        &self,
        py: Python<'py>,
        txn: &Txn<'_>,
        seq: i64,
        topic: &Bound<'py, PyString>,
        partition: i64,
        names: &mut HashMap<String, Bound<'py, PyString>>,
        out: &Bound<'py, PyList>,
    ) -> PyResult<()> {
        let txn_id = PyString::new(py, &txn.txn_id);
        let last = txn.rows.len() - 1;
        let partition = partition.into_pyobject(py)?;
        let seq = seq.into_pyobject(py)?;
        let first = txn.first_offset.into_pyobject(py)?;
        let end = txn.end_offset.into_pyobject(py)?;
        let ts = txn.source_ts_ms.into_pyobject(py)?;
        for (n, data) in txn.rows.iter().enumerate() {
            let database = name(py, names, &data.database);
            let table = name(py, names, &data.table);
            let fields = [
                self.kind_row.bind(py).clone().into_any(),
                topic.clone().into_any(),
                partition.clone().into_any(),
                txn_id.clone().into_any(),
                seq.clone().into_any(),
                n.into_pyobject(py)?.into_any(),
                database.into_any(),
                table.into_any(),
                self.op_names[data.op].bind(py).clone().into_any(),
                PyString::new(py, &data.row).into_any(),
                pyo3::types::PyBool::new(py, n == last)
                    .to_owned()
                    .into_any(),
                first.clone().into_any(),
                end.clone().into_any(),
                ts.clone().into_any(),
                py.None().into_bound(py),
            ];
            out.append(self.output_row(py, fields)?)?;
        }
        Ok(())
    }

    /// An `OutputRow` of `fields`, made as `tuple.__new__(OutputRow, fields)` makes it (the
    /// type's allocator, then the items) without the intermediate tuple and the call.
    fn output_row<'py>(
        &self,
        py: Python<'py>,
        fields: [Bound<'py, PyAny>; OUTPUT_FIELDS],
    ) -> PyResult<Bound<'py, PyAny>> {
        let tp = self.output_row.as_ptr().cast::<ffi::PyTypeObject>();
        // SAFETY: `output_row` is a tuple subclass (checked in `new`); its allocator returns
        // a new, GC-tracked tuple of OUTPUT_FIELDS empty items, each set once below, and
        // `PyTuple_SetItem` steals the item's reference.
        unsafe {
            let slot = ffi::PyType_GetSlot(tp, ffi::Py_tp_alloc);
            let alloc: ffi::allocfunc = if slot.is_null() {
                ffi::PyType_GenericAlloc
            } else {
                std::mem::transmute::<*mut std::ffi::c_void, ffi::allocfunc>(slot)
            };
            let obj = alloc(tp, OUTPUT_FIELDS as ffi::Py_ssize_t);
            if obj.is_null() {
                return Err(PyErr::fetch(py));
            }
            let row = Bound::from_owned_ptr(py, obj);
            for (k, field) in fields.into_iter().enumerate() {
                if ffi::PyTuple_SetItem(obj, k as ffi::Py_ssize_t, field.into_ptr()) != 0 {
                    return Err(PyErr::fetch(py));
                }
            }
            Ok(row)
        }
    }
}

/// A DATA event's target and row, if the machine accepts them (`events.event_problem`).
fn data_of<'a>(
    offset: i64,
    database: Option<Cow<'a, str>>,
    table: Option<Cow<'a, str>>,
    op: Option<Cow<'a, str>>,
    row: Option<Cow<'a, str>>,
) -> Option<Data<'a>> {
    let (database, table, row) = (database?, table?, row?);
    if database.is_empty() || table.is_empty() {
        return None;
    }
    if database.len() > MAX_NAME_BYTES || table.len() > MAX_NAME_BYTES {
        return None;
    }
    if !row_is_object(&row) {
        return None;
    }
    let op = op_code(op.as_deref())?;
    Some(Data {
        offset,
        database,
        table,
        op,
        row,
    })
}

/// What the loader needs to know of a row's top level: empty, or holding its own `__op`.
struct TopLevel {
    empty: bool,
    has_op: bool,
}

impl<'de> Deserialize<'de> for TopLevel {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Keys;
        impl<'de> serde::de::Visitor<'de> for Keys {
            type Value = TopLevel;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<TopLevel, A::Error> {
                let mut top = TopLevel {
                    empty: true,
                    has_op: false,
                };
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    top.empty = false;
                    top.has_op |= key == "__op";
                    map.next_value::<IgnoredAny>()?;
                }
                Ok(top)
            }
        }
        deserializer.deserialize_map(Keys)
    }
}

/// The spliced row as two slices, `head` + `tail`: `{"__op":N,` and the row's text after its
/// `{`, or `{"__op":N` and `}` for an empty object. `None` where the loader must decide (not a
/// JSON object, an escaped surrogate, the row's own `__op`, an unknown op code).
fn splice(op: u8, row: &str) -> Option<(&'static [u8], &[u8])> {
    if op > 1 || !looks_like_object(row.as_bytes()) || has_surrogate_escape(row.as_bytes()) {
        return None;
    }
    let top: TopLevel = serde_json::from_str(row).ok()?;
    if top.has_op {
        return None;
    }
    const HEADS: [[&[u8]; 2]; 2] = [
        [b"{\"__op\":0,", b"{\"__op\":0"],
        [b"{\"__op\":1,", b"{\"__op\":1"],
    ];
    if top.empty {
        return Some((HEADS[op as usize][1], b"}"));
    }
    let brace = row.find('{')?;
    Some((HEADS[op as usize][0], &row.as_bytes()[brace + 1..]))
}

/// `sinks.starrocks.loader.encode_row` where it is a splice: the row's own text with
/// `"__op":N` in front. `None` where the loader must decide (see `splice`).
#[pyfunction]
fn encode_row<'py>(
    py: Python<'py>,
    op: u8,
    row: &Bound<'py, PyString>,
) -> Option<Bound<'py, PyBytes>> {
    // A str with a lone surrogate has no UTF-8 form: the loader words that error.
    let text = row.to_str().ok()?;
    let (head, tail) = splice(op, text)?;
    PyBytes::new_with(py, head.len() + tail.len(), |buf| {
        buf[..head.len()].copy_from_slice(head);
        buf[head.len()..].copy_from_slice(tail);
        Ok(())
    })
    .ok()
}

/// The loader's inner loop over a run of one table's rows (`PartitionLoader.load`):
/// `rows[start:stop]` spliced and joined by `,` into one part of the chunk being built.
///
/// `rows` are `(table, op, row, ...)` tuples. The run ends at another table, at a row the
/// loader must judge itself (an op other than UPSERT/DELETE/None/"", a row that is not a
/// splice), or where the next part would take the chunk over `max_bytes` while it already
/// has a part: the loader then handles row `stop` as it always does. `size` counts as the
/// loader's chunk does (2 for the brackets, each part's length + 1). Returns
/// `(stop, joined parts, new size)`.
#[pyfunction]
fn encode_run<'py>(
    py: Python<'py>,
    rows: &Bound<'py, PyList>,
    start: usize,
    size: usize,
    has_parts: bool,
    max_bytes: usize,
) -> PyResult<(usize, Bound<'py, PyBytes>, usize)> {
    let n = rows.len();
    let mut buf: Vec<u8> = Vec::new();
    let mut size = size;
    let mut i = start;
    let mut table: Option<Bound<'py, PyAny>> = None;
    while i < n {
        let item = rows.get_item(i)?;
        let Ok(fields) = item.downcast::<PyTuple>() else {
            break;
        };
        if fields.len() < 3 {
            break;
        }
        let this = fields.get_item(0)?;
        match &table {
            None => table = Some(this),
            Some(t) => {
                if !this.is(t) && !this.eq(t)? {
                    break;
                }
            }
        }
        let op = fields.get_item(1)?;
        let code: u8 = if op.is_none() {
            0
        } else if let Ok(text) = op.downcast::<PyString>() {
            match text.to_str() {
                Ok("" | "UPSERT") => 0,
                Ok("DELETE") => 1,
                _ => break,
            }
        } else {
            break;
        };
        let row = fields.get_item(2)?;
        let Ok(row) = row.downcast::<PyString>() else {
            break;
        };
        let Ok(text) = row.to_str() else {
            break;
        };
        let Some((head, tail)) = splice(code, text) else {
            break;
        };
        let len = head.len() + tail.len();
        if (has_parts || i > start) && size + len + 1 > max_bytes {
            break;
        }
        if i > start {
            buf.push(b',');
        }
        buf.extend_from_slice(head);
        buf.extend_from_slice(tail);
        size += len + 1;
        i += 1;
    }
    Ok((i, PyBytes::new(py, &buf), size))
}

/// Positions in an `OutputRow` (`assembler.output.OUTPUT_FIELDS`) that the counter reads.
const KIND: usize = 0;
const TOPIC: usize = 1;
const PARTITION: usize = 2;
const TXN_ID: usize = 3;
const DATABASE: usize = 6;
const TABLE: usize = 7;
const IS_TXN_END: usize = 10;
const LAST_OFFSET: usize = 12;
const SOURCE_TS: usize = 13;

/// The counts of one (topic, partition, database, table): `app/batch_count.py`'s group list.
struct Tally<'py> {
    key: [Bound<'py, PyAny>; 4],
    rows: i64,
    last_offset: Bound<'py, PyAny>,
    last_txn_id: Bound<'py, PyAny>,
    sample_txn_id: Bound<'py, PyAny>,
    txns: i64,
    source_ts: Vec<Bound<'py, PyAny>>,
}

/// Python's `a == b` with its identity shortcut, as a dict's key lookup and `==` of tuples do.
fn same(a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> PyResult<bool> {
    Ok(a.is(b) || a.eq(b)?)
}

/// `BatchCounter.count` of output rows whose kind is all `kind_row`: per (topic, partition,
/// database, table), in the order first seen, `(topic, partition, database, table, rows, last
/// offset, its txn_id, smallest txn_id, transactions, source times)`. `None` when a row is
/// another kind or not a tuple of `OUTPUT_FIELDS` (a REJECT is keyed by its reason's first
/// word): the Python loop counts the rows then.
#[pyfunction]
fn count_rows<'py>(
    py: Python<'py>,
    rows: &Bound<'py, PyList>,
    kind_row: &Bound<'py, PyString>,
    source_times: bool,
) -> PyResult<Option<Bound<'py, PyList>>> {
    let none = py.None().into_bound(py);
    let mut tallies: Vec<Tally<'py>> = Vec::new();
    let mut at = 0usize; // the tally of the row before: rows come in runs of one key
    for item in rows.iter() {
        let Ok(row) = item.downcast::<PyTuple>() else {
            return Ok(None);
        };
        if row.len() != OUTPUT_FIELDS || !same(&row.get_item(KIND)?, kind_row.as_any())? {
            return Ok(None);
        }
        let key = [
            row.get_item(TOPIC)?,
            row.get_item(PARTITION)?,
            row.get_item(DATABASE)?,
            row.get_item(TABLE)?,
        ];
        let is_key = |t: &Tally<'py>| -> PyResult<bool> {
            for (a, b) in t.key.iter().zip(key.iter()) {
                if !same(a, b)? {
                    return Ok(false);
                }
            }
            Ok(true)
        };
        if at >= tallies.len() || !is_key(&tallies[at])? {
            let mut found = None;
            for (k, t) in tallies.iter().enumerate() {
                if is_key(t)? {
                    found = Some(k);
                    break;
                }
            }
            at = match found {
                Some(k) => k,
                None => {
                    tallies.push(Tally {
                        key,
                        rows: 0,
                        last_offset: none.clone(),
                        last_txn_id: none.clone(),
                        sample_txn_id: none.clone(),
                        txns: 0,
                        source_ts: Vec::new(),
                    });
                    tallies.len() - 1
                }
            };
        }
        let tally = &mut tallies[at];
        tally.rows += 1;
        let txn_id = row.get_item(TXN_ID)?;
        let last = row.get_item(LAST_OFFSET)?;
        if !last.is_none()
            && (tally.last_offset.is_none()
                || (!last.is(&tally.last_offset) && last.gt(&tally.last_offset)?))
        {
            tally.last_offset = last;
            tally.last_txn_id = txn_id.clone();
        }
        if !txn_id.is_none()
            && (tally.sample_txn_id.is_none()
                || (!txn_id.is(&tally.sample_txn_id) && txn_id.lt(&tally.sample_txn_id)?))
        {
            tally.sample_txn_id = txn_id;
        }
        if row.get_item(IS_TXN_END)?.is_truthy()? {
            tally.txns += 1;
            let ts = row.get_item(SOURCE_TS)?;
            if source_times && !ts.is_none() {
                tally.source_ts.push(ts);
            }
        }
    }
    let out = PyList::empty(py);
    for t in tallies {
        let [topic, partition, database, table] = t.key;
        let fields = [
            topic,
            partition,
            database,
            table,
            t.rows.into_pyobject(py)?.into_any(),
            t.last_offset,
            t.last_txn_id,
            t.sample_txn_id,
            t.txns.into_pyobject(py)?.into_any(),
            PyList::new(py, t.source_ts)?.into_any(),
        ];
        out.append(PyTuple::new(py, fields)?)?;
    }
    Ok(Some(out))
}

/// One Python string per distinct database or table name in a call.
fn name<'py>(
    py: Python<'py>,
    names: &mut HashMap<String, Bound<'py, PyString>>,
    text: &str,
) -> Bound<'py, PyString> {
    if let Some(found) = names.get(text) {
        return found.clone();
    }
    let made = PyString::new(py, text);
    names.insert(text.to_string(), made.clone());
    made
}

#[pymodule]
fn txncdc_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<JsonTxnScanner>()?;
    m.add_function(wrap_pyfunction!(encode_row, m)?)?;
    m.add_function(wrap_pyfunction!(encode_run, m)?)?;
    m.add_function(wrap_pyfunction!(count_rows, m)?)?;
    Ok(())
}
