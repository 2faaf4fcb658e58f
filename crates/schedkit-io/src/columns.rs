//! Rows of any serialisable struct appended field by field to typed columns: a serde
//! `Serializer` that takes each field's value straight from the typed row, with no
//! `serde_json::Value` (or map of them) per row in between.
//!
//! Going through `Value` cost a map with a `String` key per field and row: handing a
//! 10,000-thread report to Python took 0.55-0.74 s that way (docs/results/python.md).

use crate::tables::Column;
use serde::ser::{self, Impossible, Serialize, SerializeStruct, Serializer};
use std::fmt;

/// One field's value as its row serialises it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Scalar {
    Null,
    Bool(bool),
    Int(i64),
    /// An unsigned value above `i64::MAX`: an integer, but none a column can hold.
    BigUint(u64),
    Float(f64),
    Str(String),
}

/// The kind a column takes from its non-null values: any float makes it a float column,
/// any string (or value of another kind beside them) a string column.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub(crate) enum Kind {
    Unknown,
    Bool,
    Int,
    Float,
    Str,
}

impl Scalar {
    pub(crate) fn kind(&self) -> Kind {
        match self {
            Scalar::Null => Kind::Unknown,
            Scalar::Bool(_) => Kind::Bool,
            Scalar::Int(_) | Scalar::BigUint(_) => Kind::Int,
            Scalar::Float(_) => Kind::Float,
            Scalar::Str(_) => Kind::Str,
        }
    }

    fn as_i64(&self) -> Option<i64> {
        match *self {
            Scalar::Int(i) => Some(i),
            _ => None,
        }
    }

    fn as_f64(&self) -> Option<f64> {
        match *self {
            Scalar::Int(i) => Some(i as f64),
            Scalar::BigUint(u) => Some(u as f64),
            Scalar::Float(f) => Some(f),
            _ => None,
        }
    }

    fn as_bool(&self) -> Option<bool> {
        match *self {
            Scalar::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// The text a string column holds for this value (JSON's spelling of numbers).
    fn into_text(self) -> Option<String> {
        match self {
            Scalar::Null => None,
            Scalar::Str(s) => Some(s),
            Scalar::Bool(b) => Some(b.to_string()),
            Scalar::Int(i) => Some(i.to_string()),
            Scalar::BigUint(u) => Some(u.to_string()),
            Scalar::Float(f) => Some(serde_json::Value::from(f).to_string()),
        }
    }

    /// A value the scalar serializer does not take (a sequence, a map, a nested struct),
    /// as the JSON document would hold it: a string column of its JSON text.
    fn from_json<T: Serialize + ?Sized>(value: &T) -> Scalar {
        match serde_json::to_value(value) {
            Ok(serde_json::Value::Null) | Err(_) => Scalar::Null,
            Ok(serde_json::Value::String(s)) => Scalar::Str(s),
            Ok(other) => Scalar::Str(other.to_string()),
        }
    }
}

/// A column's values, named, with the kind it has so far.
struct Builder {
    name: String,
    kind: Kind,
    values: Vec<Scalar>,
}

/// Columns filled row by row; a field a row lacks is null in that row.
pub(crate) struct Columns {
    columns: Vec<Builder>,
    rows: usize,
}

impl Columns {
    /// No columns yet, or those of `template` (names in its order, kinds from its values,
    /// no rows): an empty table keeps its schema.
    pub(crate) fn new<T: Serialize>(template: Option<&T>) -> Columns {
        let mut c = Columns {
            columns: Vec::new(),
            rows: 0,
        };
        if let Some(t) = template {
            c.push_row(t);
            for b in &mut c.columns {
                b.values.clear();
            }
            c.rows = 0;
        }
        c
    }

    /// A column holding `value` in every row, put before the others.
    pub(crate) fn constant_first(&mut self, name: &str, value: Scalar, rows: usize) {
        self.columns.insert(
            0,
            Builder {
                name: name.to_string(),
                kind: value.kind(),
                values: vec![value; rows],
            },
        );
    }

    /// Appends one row; it must serialise as a struct (every report row does).
    pub(crate) fn push_row<T: Serialize + ?Sized>(&mut self, row: &T) {
        row.serialize(RowSerializer {
            columns: self,
            next: 0,
        })
        .expect("table rows serialise as structs");
        self.rows += 1;
        for b in &mut self.columns {
            if b.values.len() < self.rows {
                b.values.push(Scalar::Null);
            }
        }
    }

    /// Puts `value` in column `key` of the current row. Fields come in declaration order,
    /// so the column after the last one used is nearly always the right one.
    fn put(&mut self, next: &mut usize, key: &str, value: Scalar) {
        let i = match self.columns.get(*next) {
            Some(b) if b.name == key => *next,
            _ => match self.columns.iter().position(|b| b.name == key) {
                Some(i) => i,
                None => {
                    self.columns.push(Builder {
                        name: key.to_string(),
                        kind: Kind::Unknown,
                        values: vec![Scalar::Null; self.rows],
                    });
                    self.columns.len() - 1
                }
            },
        };
        let b = &mut self.columns[i];
        let k = value.kind();
        if k > b.kind {
            b.kind = k;
        }
        b.values.push(value);
        *next = i + 1;
    }

    /// The typed columns: a column's kind is the widest of its values' kinds (all-null
    /// columns are integer columns).
    pub(crate) fn finish(self) -> Vec<(String, Column)> {
        self.columns
            .into_iter()
            .map(|b| {
                let v = b.values;
                let col = match b.kind {
                    Kind::Unknown | Kind::Int => {
                        Column::Int(v.iter().map(Scalar::as_i64).collect())
                    }
                    Kind::Float => Column::Float(v.iter().map(Scalar::as_f64).collect()),
                    Kind::Bool => Column::Bool(v.iter().map(Scalar::as_bool).collect()),
                    Kind::Str => Column::Str(v.into_iter().map(Scalar::into_text).collect()),
                };
                (b.name, col)
            })
            .collect()
    }
}

/// The serializers' error: a value they do not take (the caller falls back to JSON).
#[derive(Debug)]
pub(crate) struct Unsupported(String);

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unsupported {}

impl ser::Error for Unsupported {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Unsupported(msg.to_string())
    }
}

fn unsupported<T>(what: &str) -> Result<T, Unsupported> {
    Err(Unsupported(format!("not a table cell: {what}")))
}

/// One row: a struct whose fields go to their columns.
struct RowSerializer<'a> {
    columns: &'a mut Columns,
    next: usize,
}

impl SerializeStruct for RowSerializer<'_> {
    type Ok = ();
    type Error = Unsupported;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Unsupported> {
        let v = value
            .serialize(ScalarSerializer)
            .unwrap_or_else(|_| Scalar::from_json(value));
        self.columns.put(&mut self.next, key, v);
        Ok(())
    }

    fn end(self) -> Result<(), Unsupported> {
        Ok(())
    }
}

/// Only structs are rows; everything else is refused.
macro_rules! refuse {
    ($($f:ident($($t:ty),*) -> $r:ty;)*) => {
        $(fn $f(self, $(_: $t),*) -> Result<$r, Unsupported> { unsupported(stringify!($f)) })*
    };
}

impl<'a> Serializer for RowSerializer<'a> {
    type Ok = ();
    type Error = Unsupported;
    type SerializeSeq = Impossible<(), Unsupported>;
    type SerializeTuple = Impossible<(), Unsupported>;
    type SerializeTupleStruct = Impossible<(), Unsupported>;
    type SerializeTupleVariant = Impossible<(), Unsupported>;
    type SerializeMap = Impossible<(), Unsupported>;
    type SerializeStruct = Self;
    type SerializeStructVariant = Impossible<(), Unsupported>;

    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self, Unsupported> {
        Ok(self)
    }

    refuse! {
        serialize_bool(bool) -> ();
        serialize_i8(i8) -> ();
        serialize_i16(i16) -> ();
        serialize_i32(i32) -> ();
        serialize_i64(i64) -> ();
        serialize_u8(u8) -> ();
        serialize_u16(u16) -> ();
        serialize_u32(u32) -> ();
        serialize_u64(u64) -> ();
        serialize_f32(f32) -> ();
        serialize_f64(f64) -> ();
        serialize_char(char) -> ();
        serialize_str(&str) -> ();
        serialize_bytes(&[u8]) -> ();
        serialize_none() -> ();
        serialize_unit() -> ();
        serialize_unit_struct(&'static str) -> ();
        serialize_unit_variant(&'static str, u32, &'static str) -> ();
        serialize_seq(Option<usize>) -> Self::SerializeSeq;
        serialize_tuple(usize) -> Self::SerializeTuple;
        serialize_tuple_struct(&'static str, usize) -> Self::SerializeTupleStruct;
        serialize_tuple_variant(&'static str, u32, &'static str, usize) -> Self::SerializeTupleVariant;
        serialize_map(Option<usize>) -> Self::SerializeMap;
        serialize_struct_variant(&'static str, u32, &'static str, usize) -> Self::SerializeStructVariant;
    }

    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<(), Unsupported> {
        unsupported("option")
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: &T,
    ) -> Result<(), Unsupported> {
        unsupported("newtype struct")
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), Unsupported> {
        unsupported("newtype variant")
    }
}

/// One field's value, if it is a scalar. Numbers and strings as `serde_json::to_value`
/// would give them: a non-finite float is null, a unit variant its name.
struct ScalarSerializer;

/// `serialize_<t>` for integer types that fit an i64 (the trait wants one method per type).
macro_rules! widen_to_int {
    ($($method:ident: $t:ty),*) => {
        $(fn $method(self, v: $t) -> Result<Scalar, Unsupported> {
            Ok(Scalar::Int(v.into()))
        })*
    };
}

impl Serializer for ScalarSerializer {
    type Ok = Scalar;
    type Error = Unsupported;
    type SerializeSeq = Impossible<Scalar, Unsupported>;
    type SerializeTuple = Impossible<Scalar, Unsupported>;
    type SerializeTupleStruct = Impossible<Scalar, Unsupported>;
    type SerializeTupleVariant = Impossible<Scalar, Unsupported>;
    type SerializeMap = Impossible<Scalar, Unsupported>;
    type SerializeStruct = Impossible<Scalar, Unsupported>;
    type SerializeStructVariant = Impossible<Scalar, Unsupported>;

    fn serialize_bool(self, v: bool) -> Result<Scalar, Unsupported> {
        Ok(Scalar::Bool(v))
    }
    // Every integer narrower than 64 bits widens losslessly into an i64 cell.
    widen_to_int!(
        serialize_i8: i8,
        serialize_i16: i16,
        serialize_i32: i32,
        serialize_u8: u8,
        serialize_u16: u16,
        serialize_u32: u32
    );
    fn serialize_i64(self, v: i64) -> Result<Scalar, Unsupported> {
        Ok(Scalar::Int(v))
    }
    fn serialize_u64(self, v: u64) -> Result<Scalar, Unsupported> {
        Ok(i64::try_from(v).map_or(Scalar::BigUint(v), Scalar::Int))
    }
    fn serialize_f32(self, v: f32) -> Result<Scalar, Unsupported> {
        self.serialize_f64(v.into())
    }
    fn serialize_f64(self, v: f64) -> Result<Scalar, Unsupported> {
        Ok(if v.is_finite() {
            Scalar::Float(v)
        } else {
            Scalar::Null
        })
    }
    fn serialize_char(self, v: char) -> Result<Scalar, Unsupported> {
        Ok(Scalar::Str(v.to_string()))
    }
    fn serialize_str(self, v: &str) -> Result<Scalar, Unsupported> {
        Ok(Scalar::Str(v.to_string()))
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<Scalar, Unsupported> {
        unsupported("bytes")
    }
    fn serialize_none(self) -> Result<Scalar, Unsupported> {
        Ok(Scalar::Null)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Result<Scalar, Unsupported> {
        v.serialize(self)
    }
    fn serialize_unit(self) -> Result<Scalar, Unsupported> {
        Ok(Scalar::Null)
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<Scalar, Unsupported> {
        Ok(Scalar::Null)
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<Scalar, Unsupported> {
        Ok(Scalar::Str(variant.to_string()))
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        v: &T,
    ) -> Result<Scalar, Unsupported> {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<Scalar, Unsupported> {
        unsupported("newtype variant")
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, Unsupported> {
        unsupported("sequence")
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, Unsupported> {
        unsupported("tuple")
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, Unsupported> {
        unsupported("tuple struct")
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, Unsupported> {
        unsupported("tuple variant")
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Unsupported> {
        unsupported("map")
    }
    fn serialize_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStruct, Unsupported> {
        unsupported("struct")
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, Unsupported> {
        unsupported("struct variant")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Serialize)]
    struct Row {
        a: u64,
        b: Option<f64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        c: Option<&'static str>,
        d: Vec<u8>,
        e: bool,
    }

    fn table(rows: &[Row]) -> Vec<(String, Column)> {
        let mut c = Columns::new::<Row>(None);
        for r in rows {
            c.push_row(r);
        }
        c.finish()
    }

    #[test]
    fn fields_land_in_their_columns_with_their_kinds() {
        let rows = [
            Row {
                a: 1,
                b: None,
                c: None,
                d: vec![],
                e: true,
            },
            Row {
                a: u64::MAX,
                b: Some(0.5),
                c: Some("x"),
                d: vec![1, 2],
                e: false,
            },
            Row {
                a: 3,
                b: Some(f64::NAN),
                c: None,
                d: vec![3],
                e: true,
            },
        ];
        let t = table(&rows);
        let names: Vec<&str> = t.iter().map(|(n, _)| n.as_str()).collect();
        // `c` first appears in the second row: after the columns the first row had.
        assert_eq!(names, ["a", "b", "d", "e", "c"]);
        // Beyond i64 is null, as serde_json's `as_i64` had it.
        assert_eq!(t[0].1, Column::Int(vec![Some(1), None, Some(3)]));
        // A non-finite float is null, as in the JSON report.
        assert_eq!(t[1].1, Column::Float(vec![None, Some(0.5), None]));
        // Not a scalar: the JSON text.
        assert_eq!(
            t[2].1,
            Column::Str(vec![
                Some("[]".into()),
                Some("[1,2]".into()),
                Some("[3]".into())
            ])
        );
        assert_eq!(
            t[3].1,
            Column::Bool(vec![Some(true), Some(false), Some(true)])
        );
        assert_eq!(t[4].1, Column::Str(vec![None, Some("x".into()), None]));
    }

    #[test]
    fn a_template_gives_an_empty_table_its_schema() {
        let t = Row {
            a: 0,
            b: Some(1.0),
            c: None,
            d: vec![],
            e: false,
        };
        let mut c = Columns::new(Some(&t));
        c.constant_first("policy", Scalar::Str("rr".into()), 0);
        let cols = c.finish();
        let kinds: Vec<(&str, &Column)> = cols.iter().map(|(n, c)| (n.as_str(), c)).collect();
        assert_eq!(
            kinds,
            [
                ("policy", &Column::Str(vec![])),
                ("a", &Column::Int(vec![])),
                ("b", &Column::Float(vec![])),
                ("d", &Column::Str(vec![])),
                ("e", &Column::Bool(vec![])),
            ]
        );
    }
}
