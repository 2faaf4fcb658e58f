//! `schedkit topo`: the machine's topology (sysfs) as a table or JSON (the table is
//! `schedkit_render::topo`'s).

use crate::failure::Failure;
use clap::Args;
use schedkit_linux::topo::Topology;

#[derive(Args)]
pub struct TopoArgs {
    /// Print the topology as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn topo(a: TopoArgs) -> Result<(), Failure> {
    let t = Topology::host()?;
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&t).map_err(anyhow::Error::from)?
        );
    } else {
        print!("{}", schedkit_render::topo::text(&t));
    }
    Ok(())
}
