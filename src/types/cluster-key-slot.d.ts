// cluster-key-slot (the slot function ioredis itself uses) ships no types.
declare module 'cluster-key-slot' {
  /** The Redis Cluster hash slot (0-16383) of a key, honouring its `{...}` hash tag. */
  function calculateSlot(key: string | Buffer): number;
  namespace calculateSlot {
    /** The common slot of several keys, or -1 when they differ. */
    function generateMulti(keys: (string | Buffer)[]): number;
  }
  export default calculateSlot;
}
