export { UpstreamPool as ConnectionPool, UpstreamConnection } from './upstream-pool.js';
