//! `schedkit import simso`, `schedkit export simso`, `schedkit sweep merge`, and writing the
//! `--parquet DIR` tables of `sim`, `compare` and sweeps. The work is `schedkit_io`'s; this
//! module parses arguments, prints warnings, and writes files.

use crate::failure::Failure;
use anyhow::Context;
use clap::{Args, Subcommand};
use schedkit_core::scenario::Scenario;
use schedkit_io::shard::SweepDoc;
use schedkit_io::tables::{self, Table};
use std::path::{Path, PathBuf};

#[derive(Subcommand)]
pub enum ImportCommand {
    /// Turn a SimSo configuration (XML, as SimSo's `Configuration.save` writes it) into a
    /// scenario file (TOML), printed or written with -o. What schedkit does not model is an
    /// error naming the line and attribute.
    Simso(ConvertArgs),
}

#[derive(Subcommand)]
pub enum ExportCommand {
    /// Write a scenario of periodic sequential tasks (edf, gedf, pedf; rm on one core) as a
    /// SimSo configuration (XML), printed or written with -o.
    Simso(ConvertArgs),
}

#[derive(Args)]
pub struct ConvertArgs {
    /// The file to convert.
    file: PathBuf,
    /// Write here instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
}

#[derive(Subcommand)]
pub enum SweepCommand {
    /// Merge the `--json` outputs of `schedkit sim FILE --sweep ... --shard I/N` (every I of
    /// one N, each once) into the whole sweep: the same table or JSON as the unsharded run.
    Merge(MergeArgs),
}

#[derive(Args)]
pub struct MergeArgs {
    /// The shards' JSON files.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Print the merged sweep as JSON instead of the table.
    #[arg(long)]
    json: bool,
    /// Also write the merged rows as DIR/sweep.parquet.
    #[arg(long, value_name = "DIR")]
    parquet: Option<PathBuf>,
}

fn emit(text: &str, output: Option<&Path>) -> Result<(), Failure> {
    match output {
        Some(p) => std::fs::write(p, text).with_context(|| format!("writing {}", p.display()))?,
        None => print!("{text}"),
    }
    Ok(())
}

pub fn import(c: ImportCommand) -> Result<(), Failure> {
    let ImportCommand::Simso(a) = c;
    let imported = schedkit_io::simso::import_file(&a.file)?;
    // Check the result as any scenario file, so what is written always loads.
    Scenario::parse(&a.file.display().to_string(), &imported.toml)?;
    for w in &imported.warnings {
        eprintln!("schedkit: warning: {w}");
    }
    emit(&imported.toml, a.output.as_deref())
}

pub fn export(c: ExportCommand) -> Result<(), Failure> {
    let ExportCommand::Simso(a) = c;
    let s = Scenario::load(&a.file)?;
    emit(&schedkit_io::simso::export(&s)?, a.output.as_deref())
}

pub fn sweep(c: SweepCommand) -> Result<(), Failure> {
    let SweepCommand::Merge(a) = c;
    let merged = schedkit_io::shard::merge(&schedkit_io::shard::read_docs(&a.files)?)?;
    print_sweep(&merged, a.json)?;
    if let Some(dir) = &a.parquet {
        write_parquet(dir, &[tables::sweep_table(&merged.rows)])?;
    }
    Ok(())
}

/// A sweep document as the table or as JSON (the format `--shard` and `merge` exchange).
pub fn print_sweep(doc: &SweepDoc, json: bool) -> Result<(), Failure> {
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(doc).context("serialising the sweep")?
        );
    } else {
        print!("{}", schedkit_io::shard::render(doc)?);
    }
    Ok(())
}

pub fn write_parquet(dir: &Path, tables: &[Table]) -> Result<(), Failure> {
    schedkit_io::parquet::write_tables(dir, tables)?;
    Ok(())
}
