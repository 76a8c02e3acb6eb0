# The benchmark harness's one shape table and its two sides' arguments, sourced by every script
# that times roformer against the PyTorch peer or Hugging Face (bench_vs_pytorch.sh,
# cpu_step_breakdown.sh, gpu_check.sh, gpu_profile_vs_peer.sh), so a shape is named once and
# every side trains the same model on the same batch.
#
#   bench_shape NAME             sets SHAPE=(hidden layers heads ffn seq batch); exit 2 on an unknown NAME
#   bench_ours_args H L A F S B  sets OURS: `roformer train --set` overrides for an MLM run of that shape
#                                with evaluation and checkpoints out of the way (add steps, device, data)
#   bench_peer_args H L A F S B  sets PEER: the same shape as torch_peer.py / hf_train_bench.py flags
#
# The shapes (hidden x layers, heads, FFN, sequence, batch):
#   quickstart   128 x 2, 4 heads, FFN 512,  seq 128, batch 16   the CPU quickstart models
#   medium       512 x 4, 8 heads, FFN 2048, seq 256, batch 8    a CPU model a user would train
#   task         128 x 4, 4 heads, FFN 512,  seq 128, batch 32   the task study's second size (0.8M)
#   bert-base    768 x 12, 12 heads, FFN 3072, seq 512, batch 32 the GPU check's BERT-base row
#   small        256 x 4, 4 heads, FFN 1024, seq 128, batch 64   the GPU check's small row
#   toy, toy-small                                               --dry-run stand-ins on the CPU

bench_shape() {
  case "$1" in
    quickstart) SHAPE=(128 2 4 512 128 16) ;;
    medium) SHAPE=(512 4 8 2048 256 8) ;;
    task) SHAPE=(128 4 4 512 128 32) ;;
    bert-base) SHAPE=(768 12 12 3072 512 32) ;;
    small) SHAPE=(256 4 4 1024 128 64) ;;
    toy) SHAPE=(64 2 2 128 64 4) ;;
    toy-small) SHAPE=(32 2 2 64 32 4) ;;
    *)
      echo "bench_shape: no shape '$1' (quickstart, medium, task, bert-base, small, toy, toy-small)" >&2
      return 2
      ;;
  esac
}

bench_ours_args() {
  OURS=(--set model.hidden_size="$1" --set model.num_layers="$2" --set model.num_heads="$3" --set model.ffn_size="$4"
        --set data.seq_len="$5" --set train.batch_size="$6" --set model.objective=mlm
        --set train.eval_every=100000 --set train.eval_batches=1 --set train.checkpoint_every=100000)
}

bench_peer_args() {
  PEER=(--hidden "$1" --layers "$2" --heads "$3" --ffn "$4" --seq "$5" --batch "$6")
}
