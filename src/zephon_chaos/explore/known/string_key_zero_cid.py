"""``string-key-zero-cid-restore``: a string-keyed checkpoint in which a lane has drawn no
chunk cannot be restored (a stored 0 reads as missing)."""

from __future__ import annotations

from zephon_chaos.explore.known.defect import KnownDefect, launch_failed, run_of
from zephon_chaos.problem import Problem
from zephon_chaos.runner import ScenarioOutcome

NO_NEXT_CID = "does not have next cid in the checkpoint"
"""Zephon's error (``Engine.load_state_dict``) for a lane whose next chunk id it did not find."""


def _restored_string_keys_with_undrawn_lane(outcome: ScenarioOutcome, problem: Problem) -> bool:
    """A launch failed on Zephon's missing-next-cid error while restoring a checkpoint whose
    keys had become strings (plain JSON persistence, or the json codec of a round over more
    than one rank) and in which some lane had not delivered a batch (its next chunk id 0).

    Where ranks failed so, none otherwise and none drew a batch (the others ended by the
    group's tear-down before their own restore failed: torchrun's agent stops the group at
    the first failure), the launch ended at its restore: whatever else its checks expected
    of it (a checkpoint due before a rank fault, the fault's own death) is a consequence,
    and explained with it."""
    run = run_of(outcome, problem)
    if run is None or not run.spec.restore_from:
        return False
    ranks = run.result.ranks
    at_restore = [NO_NEXT_CID in (rank.error or "") for rank in ranks]
    otherwise = any(rank.error and NO_NEXT_CID not in rank.error for rank in ranks)
    drew = any(rec.batches for rec in run.records)
    ended_at_restore = any(at_restore) and not otherwise and not drew
    if not (ended_at_restore or (launch_failed(problem) and any(at_restore))):
        return False
    scenario = outcome.scenario
    for source in outcome.phases:
        for facts in source.checkpoints.facts:
            if str(source.spec.checkpoint_path(facts.index)) != run.spec.restore_from:
                continue
            string_keys = scenario.persist_format == "plain_json" or (
                scenario.pipeline.aggregate_serializer == "json" and source.phase.world_size > 1
            )
            lanes = range(scenario.canonical_replicas(source.index))
            return string_keys and any(facts.lane_counts.get(lane, 0) == 0 for lane in lanes)
    return False


STRING_KEY_ZERO_CID_RESTORE = KnownDefect(
    id="string-key-zero-cid-restore",
    summary=(
        "a checkpoint whose lane keys became strings (aggregate_serializer='json', or a recipe "
        "persisting it with json.dumps/json.loads) cannot be restored while some lane has not "
        "drawn its first chunk: restore() is followed by 'Lane N does not have next cid in "
        "the checkpoint'"
    ),
    evidence=(
        "zephon 0.2.0 _internal/engine.py Engine.load_state_dict: `saved_next = "
        "ckpt.lane_next_cid.get(str(lane)) or ckpt.lane_next_cid.get(int(lane))` then `if "
        "saved_next is None: raise RuntimeError(...does not have next cid in the "
        "checkpoint)`: a stored 0 under the string key is falsy, so the `or` falls through "
        "to the absent int key. The json codec's AggregationCodec._deserialize "
        "(_internal/checkpoint/_codec.py) is a bare json.loads, so the merged checkpoint of a "
        "round over 2+ ranks comes back string-keyed. The same `or` reads ckpt.progress and "
        "ckpt.lane_ws_state, whose values are never falsy (a {chunk_id, offset} dict; a "
        "work-source state that always holds lane_id). Standalone: "
        "tests/zephon/repro/string_key_zero_cid.py (C=4, checkpoint right after iter(): "
        "json codec on 2 ranks and plain JSON on 1 are refused; msgpack, pickle, and plain "
        "JSON after one batch a lane restore). Minimal scenario: G 2 -> 2, C=2, "
        "aggregate_serializer json, checkpoint at step 0"
    ),
    explains=_restored_string_keys_with_undrawn_lane,
)
