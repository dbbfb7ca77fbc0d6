# bash completion for sluiced(8): the common EAL arguments before "--", sluiced's options after
# it (and in --replay mode), rules and pcap files for the options that take them.

_sluiced() {
  local cur prev words cword
  _init_completion || return

  case $prev in
    --config)
      _filedir '@(yaml|yml)'
      return
      ;;
    --replay | --out)
      _filedir '@(pcap|pcapng)'
      return
      ;;
    --report | --control | --huge-dir)
      _filedir
      return
      ;;
    --stats-interval | --flows | --mbufs | --mbuf-size | --burst | --max-delay | --metrics | --hash-seed | -l | --lcores | \
      -m | --file-prefix | --log-level | -a | --allow)
      return
      ;;
    --vdev)
      mapfile -t COMPREPLY < <(compgen -W "net_af_xdp0,iface= net_af_packet0,iface= net_tap0,iface=
        net_pcap0,rx_pcap= net_null0 net_ring0 virtio_user0,path= net_vhost0,iface=" -- "$cur")
      compopt -o nospace
      return
      ;;
  esac

  local i after_eal=0 replay=0
  for ((i = 1; i < cword; i++)); do
    [[ ${words[i]} == -- ]] && after_eal=1
    [[ ${words[i]} == --replay ]] && replay=1
  done
  local candidates
  if ((replay)) || [[ $cword == 1 && $cur == --r* ]]; then
    candidates="--replay --out --report --config --hash-seed --stats"
  elif ((after_eal)); then
    candidates="--config --report --stats-interval --flows --mbufs --mbuf-size --burst --max-delay --control --metrics"
  else
    candidates="-l --vdev --no-pci --no-huge -m --file-prefix --no-telemetry --huge-dir -a
      --log-level --replay --help --"
  fi
  mapfile -t COMPREPLY < <(compgen -W "$candidates" -- "$cur")
}
complete -F _sluiced sluiced
