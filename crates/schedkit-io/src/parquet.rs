//! Tables as Parquet files (`--parquet DIR`), readable by pandas, polars or DuckDB without
//! schedkit: one file per table, `DIR/NAME.parquet`, integer columns as INT64, floats as
//! DOUBLE, text as UTF-8 strings, missing values as nulls.

use crate::tables::{Column, Table};
use crate::Error;
use arrow_array::{ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn batch(t: &Table) -> Result<RecordBatch, String> {
    let mut fields = Vec::new();
    let mut arrays: Vec<ArrayRef> = Vec::new();
    for (name, col) in &t.columns {
        let (dt, array): (DataType, ArrayRef) = match col {
            Column::Int(v) => (DataType::Int64, Arc::new(Int64Array::from(v.clone()))),
            Column::Float(v) => (DataType::Float64, Arc::new(Float64Array::from(v.clone()))),
            Column::Str(v) => (DataType::Utf8, Arc::new(StringArray::from(v.clone()))),
            Column::Bool(v) => (DataType::Boolean, Arc::new(BooleanArray::from(v.clone()))),
        };
        fields.push(Field::new(name, dt, col.has_nulls()));
        arrays.push(array);
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).map_err(|e| e.to_string())
}

/// Writes each table to `dir/NAME.parquet` (creating `dir`); returns the paths written.
pub fn write_tables(dir: &Path, tables: &[Table]) -> Result<Vec<PathBuf>, Error> {
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::file(dir.display(), format!("cannot create directory: {e}")))?;
    let mut out = Vec::new();
    for t in tables {
        let path = dir.join(format!("{}.parquet", t.name));
        let fail = |m: String| Error::file(path.display(), m);
        let b = batch(t).map_err(fail)?;
        let f = std::fs::File::create(&path).map_err(|e| fail(e.to_string()))?;
        let mut w = ArrowWriter::try_new(f, b.schema(), None).map_err(|e| fail(e.to_string()))?;
        w.write(&b).map_err(|e| fail(e.to_string()))?;
        w.close().map_err(|e| fail(e.to_string()))?;
        out.push(path);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use parquet::file::reader::{FileReader, SerializedFileReader};

    #[test]
    fn writes_one_readable_file_per_table() {
        let s = schedkit_core::Scenario::parse(
            "t.toml",
            "[[process]]\nname = \"a\"\nburst = \"3ms\"\n[[process]]\nname = \"b\"\nburst = \"1ms\"\n",
        )
        .unwrap();
        let (r, trace, _) = schedkit_sim::simulate_report(&s, true).unwrap();
        let mut tables = crate::tables::report_tables(&r);
        tables.push(crate::tables::intervals_table(&s, &trace.unwrap()));
        let dir = tempfile::tempdir().unwrap();
        let paths = write_tables(dir.path(), &tables).unwrap();
        assert_eq!(paths.len(), 5);
        let reader = SerializedFileReader::new(std::fs::File::open(&paths[1]).unwrap()).unwrap();
        let meta = reader.metadata();
        assert_eq!(meta.file_metadata().num_rows(), 2);
        let schema = meta.file_metadata().schema_descr();
        assert_eq!(schema.column(0).name(), "name");
        assert_eq!(schema.column(2).name(), "arrival_ns");
    }
}
