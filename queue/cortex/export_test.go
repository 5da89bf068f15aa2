package cortex

// InRanges has cfg's import read the messages of more than two tasks in ranges of three tasks
// each, as it reads those of more than idListMax in ranges of messageChunk.
func InRanges(cfg Config) Config {
	cfg.chunking = chunking{listMax: 2, chunk: 3}
	return cfg
}
