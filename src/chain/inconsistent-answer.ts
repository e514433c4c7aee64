// The one error of a node's answer that cannot be the chain's, raised wherever an answer is read
// (the logs' decoding, the quorum's comparison of several providers): the run fails and is retried,
// nothing of it is recorded, and the watcher hands the lead to the next URL.

/** A node's answer that cannot be a chain's (a log without its place, one transaction in two blocks, providers that disagree). */
export class InconsistentLogsError extends Error {}

/**
 * A quorum's voters that answered the same question differently (logs, a header, a block one has
 * and another not). Below the safe head one of them lies; above it honest providers can too (a
 * one-block fork at the tip, an index behind its head).
 */
export class VotersDisagreeError extends InconsistentLogsError {}
