// Package archive owns a corpus's files: where its source archives and result archives are
// (ResultPath, IsSource), how an import finds the source archives (FindSources, ListSources) and
// keeps them beneath the corpus (Sources.CheckBeneath), how a replica reads a source
// (ReadSource) and writes a result (Pending: a temp file beside the target, published by its
// claim, put back if the claim did not commit, made durable by SyncPublished), and how the
// leftovers of a process that died mid-claim are swept (Sweep). Nothing here steps out of a corpus's path: every open is
// resolved beneath it.
package archive
