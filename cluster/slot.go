// Package cluster is celld's Redis Cluster model: the key → hash slot
// function (CRC16-XMODEM of the key or of its {hash tag}, modulo 16384), a
// static Topology that splits the 16384 slots into equal contiguous shares
// of a fixed node list, and the node id each node announces.
//
// It imports only the standard library; the server consults a *Topology to
// answer MOVED/CROSSSLOT and the CLUSTER command family, and main builds one
// from flags.
package cluster

import "unsafe"

// SlotCount is the number of hash slots in a Redis Cluster.
const SlotCount = 16384

// crcTable is CRC16-CCITT in its XMODEM variant (polynomial 0x1021, initial
// value 0, no reflection, no final XOR) — the function Redis Cluster names
// "crc16" — one entry per byte value, computed once at init.
var crcTable [256]uint16

func init() {
	for i := range crcTable {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		crcTable[i] = crc
	}
}

// crc16 returns the XMODEM CRC of b.
func crc16(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc = crc<<8 ^ crcTable[byte(crc>>8)^c]
	}
	return crc
}

// KeySlot returns the hash slot of key, in [0, SlotCount): Redis's
// keyHashSlot. When the key has a '{' followed later by a '}' with at least
// one byte between them, only the bytes between the first '{' and the first
// '}' after it are hashed; otherwise the whole key is. So
// "{user1000}.following" and "{user1000}.followers" share a slot,
// "foo{}{bar}" hashes all of itself (the first tag is empty), and
// "foo{{bar}}zap" hashes "{bar". It does not allocate or retain key.
func KeySlot(key []byte) int {
	for s, c := range key {
		if c != '{' {
			continue
		}
		for e := s + 1; e < len(key); e++ {
			if key[e] == '}' {
				if e == s+1 {
					break // empty tag: hash the whole key
				}
				return int(crc16(key[s+1:e]) & (SlotCount - 1))
			}
		}
		break
	}
	return int(crc16(key) & (SlotCount - 1))
}

// KeySlotString is KeySlot for a string key, without copying it.
func KeySlotString(key string) int {
	return KeySlot(unsafe.Slice(unsafe.StringData(key), len(key)))
}
