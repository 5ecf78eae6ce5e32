export const VERSION = "0.1.0"; console.log(VERSION);
