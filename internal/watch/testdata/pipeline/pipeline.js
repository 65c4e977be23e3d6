// pipeline.js sends queries through Node's mariadb connector (npm) with
// pipelining: true, its default: the queries of a batch are issued at once
// and go out on one connection without waiting for answers. It prints one
// JSON line per batch, timed around the batch.
//
//	NODE_PATH=DIR/node_modules node pipeline.js HOST PORT USER N SQL BATCHES PAUSE_MS
const mariadb = require('mariadb');

const nowUS = () => Number(process.hrtime.bigint() / 1000n) + offsetUS;
// hrtime has no epoch: tie it to the wall clock once.
const offsetUS = Date.now() * 1000 - Number(process.hrtime.bigint() / 1000n);

async function main() {
  const [host, port, user, n, sql, batches, pause] = process.argv.slice(2);
  const conn = await mariadb.createConnection({ host, port: Number(port), user, pipelining: true });
  try {
    const [row] = await conn.query('SELECT CONNECTION_ID() AS id');
    const id = Number(row.id);
    for (let b = 0; b < Number(batches); b++) {
      await new Promise((r) => setTimeout(r, Number(pause)));
      const start = nowUS();
      const all = [];
      for (let i = 0; i < Number(n); i++) {
        all.push(conn.query(sql));
      }
      await Promise.all(all);
      const end = nowUS();
      console.log(JSON.stringify({ client: 'node mariadb', conn_id: id, batch: b, n: all.length, start_us: start, end_us: end }));
    }
  } finally {
    await conn.end();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
