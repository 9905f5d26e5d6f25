import { ConnectionPool, MockConnectionFactory } from './lib';
(async () => {
  const pool = new ConnectionPool({ address: 'h:1', maxPoolSize: 10, connectionFactory: new MockConnectionFactory().factory });
  pool.ready();
  for (let r = 0; r < 3; r++) for (const conc of [1, 10, 100, 1000, 10000]) {
    let n = 0; const N = 300000; const t0 = performance.now();
    const w = async () => { while (n < N) { n++; const c = await pool.checkOut(); await undefined; pool.checkIn(c); } };
    await Promise.all(Array.from({ length: conc }, w));
    if (r === 2) console.log(conc, Math.round(N / ((performance.now() - t0) / 1000)));
  }
})();
