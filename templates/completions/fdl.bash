# bash completion for fdl. Load it with:  eval "$(fdl completions bash)"
# Candidates come from `fdl __complete`, which reads the manifest each time,
# so nested commands, presets and option choices are always current.
_fdl_complete() {
    local IFS=$'\n'
    local cur="${COMP_WORDS[COMP_CWORD]}"
    local reply
    reply=$(command fdl __complete bash -- "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null) || return 0
    case "$reply" in
        :files) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur")) ;;
        :dirs) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -d -- "$cur")) ;;
        *) COMPREPLY=($reply) ;;
    esac
}
complete -F _fdl_complete fdl
